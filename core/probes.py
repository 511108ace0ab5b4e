"""A researcher's "Test connection", run by a worker and polled from the page.

A test used to run inside the web request: twelve clicks at a slow server held twelve web
workers 12-15 s each. Now the click records a pending test in the cache (Redis) and queues a
task; the task makes the call under its own short deadline and stores the answer; the page polls
a small JSON status until it is there. One test per subject is pending at a time: a click while
one waits (or runs) gets that same test back and queues nothing (the cache's atomic add).

Keys (the cache, so CACHE_URL's Redis): `probe:<kind>:<subject>:pending` holds the pending test's
id until its task stores the answer or `pending_seconds` pass (a lost message or a dead worker
frees it then); `probe:<kind>:<subject>:<id>` holds the answer for PROBE_ANSWER_SECONDS, and
`...:<id>:progress` how far a long job has come (probe_progress: a step, a count done and a
total), which the pending state carries so that the page can show a bar.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

PROBE_ANSWER_SECONDS = 600
PROBE_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Probe:
    id: str
    queued: bool  # False: a test of this subject was already pending, and this is that one


def _pending_key(kind: str, subject: int) -> str:
    return f"probe:{kind}:{subject}:pending"


def _answer_key(kind: str, subject: int, probe_id: str) -> str:
    return f"probe:{kind}:{subject}:{probe_id}"


def probe_start(
    *,
    kind: str,
    subject: int,
    pending_seconds: float,
    send: Callable[[], None],
    detail: str = "",
) -> Probe:
    """Record a pending test of `subject` and call `send` to queue its task, or return the test
    already pending (nothing sent). `detail` is kept for the task (probe_detail: what to test).
    When `send` raises, the pending test is forgotten first."""
    key = _pending_key(kind, subject)
    for _ in range(2):
        probe_id = secrets.token_hex(16)
        cache.set(_answer_key(kind, subject, probe_id) + ":detail", detail, pending_seconds)
        if cache.add(key, probe_id, timeout=pending_seconds):
            try:
                send()
            except BaseException:
                cache.delete(key)
                raise
            return Probe(id=probe_id, queued=True)
        existing = cache.get(key)
        if existing:
            return Probe(id=str(existing), queued=False)
        # The pending test ended between the add and the get: try once more.
    raise RuntimeError("the pending connection test kept changing; try again")


def probe_pending(*, kind: str, subject: int) -> str | None:
    """The id of the test of `subject` that is pending now, if any."""
    value = cache.get(_pending_key(kind, subject))
    return str(value) if value else None


def probe_detail(*, kind: str, subject: int, probe_id: str) -> str:
    """The `detail` a test was started with ("" when none, or once it expired)."""
    return str(cache.get(_answer_key(kind, subject, probe_id) + ":detail") or "")


def probe_progress(
    *, kind: str, subject: int, probe_id: str, step: str, done: int, total: int
) -> None:
    """Record how far the test's job has come: `done` of `total` units of `step` (one cache
    write; the job calls it once per batch of work, never once per row)."""
    cache.set(
        _answer_key(kind, subject, probe_id) + ":progress",
        {"step": step, "done": done, "total": total},
        timeout=PROBE_ANSWER_SECONDS,
    )


def probe_finish(*, kind: str, subject: int, probe_id: str, answer: dict[str, Any]) -> None:
    """Store a test's answer and free the subject for the next test."""
    cache.set(_answer_key(kind, subject, probe_id), answer, timeout=PROBE_ANSWER_SECONDS)
    if cache.get(_pending_key(kind, subject)) == probe_id:
        cache.delete(_pending_key(kind, subject))


def probe_state(*, kind: str, subject: int, probe_id: str) -> dict[str, Any]:
    """{"state": "done", ...the answer} once stored, {"state": "pending"} while its task has not
    answered (with "progress": {"step", "done", "total"} once its job recorded some), {"state":
    "lost"} for a test nobody answered in time (or an unknown id)."""
    if PROBE_ID.match(probe_id):
        answer = cache.get(_answer_key(kind, subject, probe_id))
        if answer is not None:
            return {"state": "done", **answer}
        if probe_pending(kind=kind, subject=subject) == probe_id:
            progress = cache.get(_answer_key(kind, subject, probe_id) + ":progress")
            return {"state": "pending", **({"progress": progress} if progress else {})}
    return {"state": "lost"}
