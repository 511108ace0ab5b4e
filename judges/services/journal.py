"""The journal of received replies: each paid reply kept in Redis until the database holds it.

A worker that received a reply writes it here, keyed by the call's idempotency key, *before* it
writes the reply to PostgreSQL, and deletes the entry once the database write landed. Every
later claim of the call reads the journal before it sends a request: a reply whose database
write never landed (a database that refused connections for longer than the lease, a worker
killed between the reply and the write) is recorded from the journal instead of being asked for,
and paid for, again. Entries expire after CONCORD_JUDGE_JOURNAL_SECONDS, so a journal whose
deletes failed does not grow for ever.

The journal lives in the rate limiter's Redis (REDIS_URL), with short socket timeouts: when it
does not answer, the worker logs it and goes on (the database write is still the record; only the
protection against a longer outage is lost for that reply).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import lru_cache

import redis
from django.conf import settings

from judges.llm.client import ChatReply

logger = logging.getLogger(__name__)

PREFIX = "concord:journal:"


@dataclass(frozen=True)
class JournaledReply:
    """A reply as it was received, the attempt that received it, and when."""

    reply: ChatReply
    attempt: int
    received_at: str


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def call_identity(*, run_id: int, pair_id: int | str, order: str, created_at: datetime) -> str:
    """What tells one call row from any other that ever had its id (a grade call's `pair_id`
    is "answer<id>@<turn>")."""
    return f"{run_id}:{pair_id}:{order}:{created_at.isoformat()}"


def journal_key(idempotency_key: str) -> str:
    """The Redis key of a call's entry, from the idempotency key its requests carry."""
    return f"{PREFIX}{idempotency_key}"


def reply_journal_write(
    *, idempotency_key: str, identity: str, attempt: int, reply: ChatReply
) -> bool:
    """Keep a received reply until its database write lands; False when Redis refused it.

    `identity` says which call row the entry belongs to (call_identity): a database rebuilt
    beside an old Redis reuses call ids, and its calls must not take the old calls' replies.
    """
    entry = {
        "identity": identity,
        "reply": asdict(reply),
        "attempt": attempt,
        "received_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    try:
        _client(settings.REDIS_URL).set(
            journal_key(idempotency_key),
            json.dumps(entry),
            ex=int(settings.CONCORD_JUDGE_JOURNAL_SECONDS),
        )
    except redis.RedisError as exc:
        logger.warning(
            "%s: the journal of replies did not take the reply (%s); only the database has it",
            idempotency_key,
            exc,
        )
        return False
    return True


def reply_journal_read(*, idempotency_key: str, identity: str) -> JournaledReply | None:
    """The call's journaled reply, or None when there is none (or Redis does not answer)."""
    try:
        raw = _client(settings.REDIS_URL).get(journal_key(idempotency_key))
    except redis.RedisError as exc:
        logger.warning("%s: the journal of replies cannot be read (%s)", idempotency_key, exc)
        return None
    if raw is None:
        return None
    return _entry_parse(idempotency_key, raw, identity)


def _entry_parse(idempotency_key: str, raw: bytes | str, identity: str) -> JournaledReply | None:
    try:
        entry = json.loads(raw)
        if entry["identity"] != identity:
            logger.warning("%s: journal entry of another call row ignored", idempotency_key)
            return None
        return JournaledReply(
            reply=ChatReply(**entry["reply"]),
            attempt=int(entry["attempt"]),
            received_at=str(entry["received_at"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("%s: unreadable journal entry ignored (%s)", idempotency_key, exc)
        return None


def reply_journal_read_many(*, entries: dict[str, str]) -> dict[str, JournaledReply]:
    """The journaled replies of a batch's calls, by idempotency key, in one round trip.

    `entries` maps each call's idempotency key to its identity; a call with no entry (or whose
    entry is of another call row, or unreadable) is left out, as is every call when Redis does
    not answer.
    """
    keys = list(entries)
    if not keys:
        return {}
    try:
        raws = _client(settings.REDIS_URL).mget([journal_key(key) for key in keys])
    except redis.RedisError as exc:
        logger.warning("the journal of replies cannot be read (%s)", exc)
        return {}
    found: dict[str, JournaledReply] = {}
    for key, raw in zip(keys, raws, strict=True):
        if raw is not None:
            entry = _entry_parse(key, raw, entries[key])
            if entry is not None:
                found[key] = entry
    return found


def reply_journal_forget_many(*, idempotency_keys: list[str]) -> None:
    """Drop the entries of calls whose replies the database holds, in one round trip."""
    if not idempotency_keys:
        return
    try:
        _client(settings.REDIS_URL).delete(*[journal_key(key) for key in idempotency_keys])
    except redis.RedisError as exc:
        logger.warning(
            "%d journal entries not deleted (%s); they expire", len(idempotency_keys), exc
        )


def reply_journal_forget(*, idempotency_key: str) -> None:
    """Drop the call's entry once the database holds its reply (expiry covers a failure)."""
    try:
        _client(settings.REDIS_URL).delete(journal_key(idempotency_key))
    except redis.RedisError as exc:
        logger.warning("%s: journal entry not deleted (%s); it expires", idempotency_key, exc)
