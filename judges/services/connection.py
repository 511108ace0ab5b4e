"""One tiny call to an LLM judge's API, to say whether its base URL, key and model answer.

A researcher's action from the judge's page, made by a worker (task judges.connection_test on
the default queue), never in the web request: the click queues the test and the page polls its
answer (core.probes; a click while a test of the judge is pending gets that test back). The
call is made outside any transaction and bounded by a total deadline
(CONCORD_JUDGE_TEST_SECONDS), so a server that trickles bytes cannot hold the worker longer than
that. The answer or the exact error is shown; the key never appears in either.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core.broker import task_send
from core.probes import Probe, probe_finish, probe_pending, probe_start, probe_state
from core.queues import Queue
from judges.llm.client import JudgeCallError, JudgeNotConfigured, UnsafeBaseURL, chat_complete
from judges.models import Judge
from judges.services.keys import judge_api_key

TEST_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]
TEST_PARAMS = {"max_tokens": 5, "temperature": 0}


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    message: str


def _scrub(text: str, key: str) -> str:
    """The text with the key (if it appears at all) replaced, e.g. in an echoed 401 body."""
    return text.replace(key, "[the key]") if key else text


def judge_connection_test(*, judge: Judge) -> ConnectionResult:
    """Send one chat completion of at most 5 tokens; say what came back, or what went wrong."""
    if judge.kind != Judge.Kind.LLM:
        return ConnectionResult(False, f"{judge.get_kind_display()} judges make no API calls.")
    try:
        key = judge_api_key(judge=judge)
    except JudgeNotConfigured as exc:
        return ConnectionResult(False, str(exc))
    deadline = settings.CONCORD_JUDGE_TEST_SECONDS
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-test")
    future = pool.submit(
        chat_complete,
        base_url=judge.base_url,
        api_key=key,
        model=judge.model_name,
        messages=TEST_MESSAGES,
        params=TEST_PARAMS,
        idempotency_key=f"concord-test-{uuid.uuid4()}",
        timeout=deadline,
    )
    try:
        reply = future.result(timeout=deadline)
    except FutureTimeout:
        return ConnectionResult(
            False, f"no answer from {judge.base_url} within {deadline:g} s (total deadline)"
        )
    except (JudgeCallError, UnsafeBaseURL) as exc:
        return ConnectionResult(False, _scrub(f"{judge.base_url}: {exc}", key))
    finally:
        # A call past the deadline finishes (or times out) in its thread; nobody waits for it.
        pool.shutdown(wait=False)
    answer = reply.content.strip()[:200] or "(an empty reply)"
    model = reply.model_reported or judge.model_name
    return ConnectionResult(
        True,
        _scrub(
            f"{model} at {judge.base_url} answered in {reply.latency_ms} ms "
            f"({reply.tokens_in} tokens in, {reply.tokens_out} out): {answer!r}",
            key,
        ),
    )


TASK_CONNECTION_TEST = "judges.connection_test"
PROBE_KIND = "judge-test"
# How long a queued test may wait for a worker before it counts as lost (beside its deadline).
TEST_QUEUE_GRACE_SECONDS = 60.0


def judge_connection_test_start(*, judge: Judge) -> Probe:
    """Queue a connection test of the judge for a worker, or return the one already pending
    (then nothing is queued). Raise BrokerUnavailable when the broker refuses the task."""
    return probe_start(
        kind=PROBE_KIND,
        subject=judge.pk,
        pending_seconds=settings.CONCORD_JUDGE_TEST_SECONDS + TEST_QUEUE_GRACE_SECONDS,
        send=lambda: task_send(TASK_CONNECTION_TEST, args=[judge.pk], queue=Queue.DEFAULT),
    )


def judge_connection_test_run(*, judge_id: int) -> bool:
    """The worker's side: make the judge's pending test and store its answer; False when no test
    is pending (answered already, or it waited past its grace)."""
    probe_id = probe_pending(kind=PROBE_KIND, subject=judge_id)
    if probe_id is None:
        return False
    judge = Judge.objects.filter(pk=judge_id).first()
    result = (
        judge_connection_test(judge=judge)
        if judge is not None
        else ConnectionResult(False, "the judge no longer exists")
    )
    probe_finish(
        kind=PROBE_KIND,
        subject=judge_id,
        probe_id=probe_id,
        answer={"ok": result.ok, "message": result.message},
    )
    return True


def judge_connection_test_pending(*, judge: Judge) -> str | None:
    """The id of the judge's test that is pending now, if any."""
    return probe_pending(kind=PROBE_KIND, subject=judge.pk)


def judge_connection_test_state(*, judge: Judge, probe_id: str) -> dict[str, Any]:
    """The state of one of the judge's tests: pending, done (ok and message) or lost."""
    return probe_state(kind=PROBE_KIND, subject=judge.pk, probe_id=probe_id)
