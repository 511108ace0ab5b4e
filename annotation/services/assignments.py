"""The assignment engine: which pair a worker rates next, and for how long it is theirs.

A pair "needs judgments" while its taken slots (submitted assignments plus reservations that have
not expired) are fewer than the study's overlap. Taken slots are counted from the assignment rows
each time, never kept as a counter. Claimers lock the pair row before they count, so two workers
can never both take the last slot; they lock with SKIP LOCKED and so never wait on each other,
falling back to waiting only when every open pair they could take is locked.

A claim is three raw-SQL statements on PostgreSQL, the only database (see the notes above
_WORKER_LOCK for the locks they take): the ORM would need six or more round trips per claim.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from annotation.models import Assignment, Study, Worker
from annotation.services.errors import StudyNotOpen, WorkerBlocked

# How many open pairs one claim looks at; the fewest-taken of them wins. Bounded so that a claim
# reads a few index pages whatever the size of the study.
CLAIM_WINDOW = 32
# Passes before giving up: a pass ends without a claim only when someone else's claim on the
# pair it chose committed in between, so each failed pass means another worker made progress.
CLAIM_PASSES = 200


def assignments_expire(*, now: datetime | None = None) -> int:
    """Mark reservations past their expiry as expired; return how many changed.

    Expired reservations already stop counting toward overlap the moment they pass expires_at;
    this only brings the stored status in line (run it from a periodic task).
    """
    now = now or timezone.now()
    return Assignment.objects.filter(status=Assignment.Status.RESERVED, expires_at__lte=now).update(
        status=Assignment.Status.EXPIRED
    )


def assignments_release(*, worker: Worker) -> int:
    """Give back every reservation a worker holds (they stopped, returned or were blocked)."""
    return Assignment.objects.filter(worker=worker, status=Assignment.Status.RESERVED).update(
        status=Assignment.Status.RETURNED
    )


def assignment_claim_next(*, worker: Worker) -> Assignment | None:
    """Reserve the next pair for a worker and return the assignment, or None when no work is left.

    A worker holding an open reservation gets that one back (pause and come back, back button,
    double click). Otherwise: a gold pair at the study's gold share (always during the
    qualification block), else the open pair with the fewest taken slots among a random window,
    ties broken by the pairs' random keys. Raises StudyNotOpen or WorkerBlocked.
    """
    wait_for: int | None = None
    for _ in range(CLAIM_PASSES):
        result = _claim_pass(worker=worker, wait_for=wait_for)
        if result.assignment is not None:
            return result.assignment
        if result.wait_for is None and not result.retry:
            return None
        # Every open pair this worker could take was being claimed by someone else (wait for one
        # of them: claims are short), or a concurrent claim filled the chosen pair (try again);
        # neither means "no work".
        wait_for = result.wait_for
    return None


def _next_a_left(*, shown: int, a_left: int) -> bool:
    """Counterbalance the shown order per worker: whichever side is behind, random when even."""
    left, right = a_left, shown - a_left
    if left != right:
        return left < right
    return random.random() < 0.5


# The claim in three short statements under the worker's row lock.
#
# Locks taken, in this order, until the claim's transaction commits:
#   1. FOR UPDATE on the worker's row (annotation_worker): one worker's claims run one at a time.
#   2. FOR UPDATE SKIP LOCKED on at most one open pair row (annotation_pair): two claimers never
#      count the same pair's slots at once, and never wait on each other.
# Gold pairs have no overlap cap and are not locked.
#
# The slots of the locked pair are counted again by the INSERT, a later statement: under READ
# COMMITTED it reads a fresh snapshot, so it sees every claim committed before the lock was ours
# (the statement that locked the pair may have started reading before such a claim committed).
# The INSERT also refuses when the worker meanwhile holds an open reservation (two requests of
# one worker racing for the worker lock); the next pass then hands that reservation back.

_TAKEN = "(a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > %(now)s))"

_WORKER_LOCK = """
SELECT w.state, s.status, s.target_per_worker, s.qualification_items, s.gold_share,
       s.overlap, s.time_limit_seconds, h.submitted, h.shown, h.a_left, h.held, h.stale
FROM "annotation_worker" w
JOIN "annotation_study" s ON s.id = w.study_id
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE a.status = 'submitted') AS submitted,
           count(*) AS shown,
           count(*) FILTER (WHERE a.a_left) AS a_left,
           count(*) FILTER (WHERE a.status = 'reserved' AND a.expires_at > %(now)s) AS held,
           count(*) FILTER (WHERE a.status = 'reserved' AND a.expires_at <= %(now)s) AS stale
    FROM "annotation_assignment" a WHERE a.worker_id = w.id
) h
WHERE w.id = %(worker)s
FOR UPDATE OF w
"""

_WINDOW_HALF = """
SELECT "annotation_pair".id, "annotation_pair".shuffle_key, {part} AS part, t.taken
FROM "annotation_pair"
CROSS JOIN LATERAL (
    SELECT count(*) AS taken FROM "annotation_assignment" a
    WHERE a.pair_id = "annotation_pair".id AND {taken}
) t
WHERE "annotation_pair".study_id = %(study)s AND NOT "annotation_pair".is_gold
  AND "annotation_pair".shuffle_key {compare} %(start)s
  AND t.taken < %(overlap)s
  AND NOT EXISTS (SELECT 1 FROM "annotation_assignment" m
                  WHERE m.pair_id = "annotation_pair".id AND m.worker_id = %(worker)s)
ORDER BY "annotation_pair".shuffle_key
LIMIT %(window)s
"""

# The window: up to CLAIM_WINDOW open pairs the worker never had, walked in shuffle-key order from
# a random key and wrapping around (the second half runs only when the first comes up short).
# Of those, lock the fewest-taken one nobody else holds; also say which one would have been first,
# so that a pass that found only busy pairs can wait for it.
_LOCK_OPEN_PAIR = f"""
WITH candidate AS (
    SELECT id, shuffle_key, part, taken FROM (
        ({_WINDOW_HALF.format(part=0, compare=">=", taken=_TAKEN)})
        UNION ALL
        ({_WINDOW_HALF.format(part=1, compare="<", taken=_TAKEN)})
    ) walked
    LIMIT %(window)s
), locked AS (
    SELECT "annotation_pair".id FROM "annotation_pair"
    JOIN candidate ON candidate.id = "annotation_pair".id
    ORDER BY candidate.taken, candidate.part, candidate.shuffle_key
    LIMIT 1
    FOR UPDATE OF "annotation_pair" SKIP LOCKED
)
SELECT (SELECT id FROM locked),
       (SELECT id FROM candidate ORDER BY taken, part, shuffle_key LIMIT 1)
"""

_LOCK_PAIR = 'SELECT id FROM "annotation_pair" WHERE id = %(pair)s FOR UPDATE'

_GOLD_PAIR = """
SELECT id FROM (
    (SELECT "annotation_pair".id FROM "annotation_pair"
     WHERE "annotation_pair".study_id = %(study)s AND "annotation_pair".is_gold
       AND "annotation_pair".shuffle_key >= %(start)s
       AND NOT EXISTS (SELECT 1 FROM "annotation_assignment" m
                       WHERE m.pair_id = "annotation_pair".id AND m.worker_id = %(worker)s)
     ORDER BY "annotation_pair".shuffle_key LIMIT 1)
    UNION ALL
    (SELECT "annotation_pair".id FROM "annotation_pair"
     WHERE "annotation_pair".study_id = %(study)s AND "annotation_pair".is_gold
       AND "annotation_pair".shuffle_key < %(start)s
       AND NOT EXISTS (SELECT 1 FROM "annotation_assignment" m
                       WHERE m.pair_id = "annotation_pair".id AND m.worker_id = %(worker)s)
     ORDER BY "annotation_pair".shuffle_key LIMIT 1)
) walked
LIMIT 1
"""

# Reserve the pair when it still has a free slot (gold: always), the worker never had it and holds
# no other open reservation. Stale reservations of the pair get their status brought in line.
_RESERVE = f"""
WITH stale AS (
    UPDATE "annotation_assignment" SET status = 'expired'
    WHERE pair_id = %(pair)s AND status = 'reserved' AND expires_at <= %(now)s
      AND %(capped)s
)
INSERT INTO "annotation_assignment"
    (public_id, study_id, pair_id, worker_id, a_left, status, reserved_at, expires_at)
SELECT %(public_id)s, %(study)s, %(pair)s, %(worker)s, %(a_left)s, 'reserved', %(now)s,
       %(expires_at)s
WHERE (NOT %(capped)s
       OR (SELECT count(*) FROM "annotation_assignment" a
           WHERE a.pair_id = %(pair)s AND {_TAKEN}) < %(overlap)s)
  AND NOT EXISTS (SELECT 1 FROM "annotation_assignment" m
                  WHERE m.pair_id = %(pair)s AND m.worker_id = %(worker)s)
  AND NOT EXISTS (SELECT 1 FROM "annotation_assignment" r
                  WHERE r.worker_id = %(worker)s AND r.status = 'reserved'
                    AND r.expires_at > %(now)s)
RETURNING id
"""


@dataclass(frozen=True)
class _Pass:
    assignment: Assignment | None
    # When no claim was made: the pair to wait for (every open pair was busy), or retry=True (a
    # concurrent claim got in between); neither means no work is left.
    wait_for: int | None = None
    retry: bool = False


@transaction.atomic
def _claim_pass(*, worker: Worker, wait_for: int | None) -> _Pass:
    """Try once to reserve a pair: see the lock notes above _WORKER_LOCK."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_WORKER_LOCK, {"worker": worker.pk, "now": now})
        row = cursor.fetchone()
    if row is None:
        raise Worker.DoesNotExist(f"Worker {worker.pk} does not exist.")
    (state, study_status, target, qualification, gold_share, overlap, time_limit) = row[:7]
    submitted, shown, a_left, held, stale = row[7:]
    if study_status != Study.Status.LIVE:
        raise StudyNotOpen("This study is not taking judgments at the moment.")
    if state == Worker.State.BLOCKED:
        raise WorkerBlocked(
            "You can't take more items in this study: too many check questions were answered "
            "incorrectly, or a researcher stopped your session after review. Thank you for "
            "your time; the work you already submitted is recorded."
        )
    if state in (Worker.State.DONE, Worker.State.RETURNED):
        return _Pass(None)
    if stale:
        Assignment.objects.filter(
            worker=worker, status=Assignment.Status.RESERVED, expires_at__lte=now
        ).update(status=Assignment.Status.EXPIRED)
    if held:
        kept = (
            Assignment.objects.filter(
                worker=worker, status=Assignment.Status.RESERVED, expires_at__gt=now
            )
            .select_related("pair")
            .order_by("pk")
            .first()
        )
        if kept is not None:
            return _Pass(kept)
    if submitted >= target:
        return _Pass(None)

    claim = _Claim(
        study_id=worker.study_id,
        worker=worker,
        overlap=overlap,
        now=now,
        expires_at=now + timedelta(seconds=time_limit),
        a_left=_next_a_left(shown=shown, a_left=a_left),
    )
    want_gold = submitted < qualification or random.random() < float(gold_share)
    if want_gold:
        with connection.cursor() as cursor:
            cursor.execute(_GOLD_PAIR, claim.params(start=random.random()))
            gold = cursor.fetchone()
        if gold is not None:
            return _reserved(claim.reserve(pair_id=gold[0], capped=False))

    if wait_for is not None:
        with connection.cursor() as cursor:
            cursor.execute(_LOCK_PAIR, {"pair": wait_for})
            waited = cursor.fetchone()
        if waited is not None:
            assignment = claim.reserve(pair_id=wait_for, capped=True)
            if assignment is not None:
                return _Pass(assignment)
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_OPEN_PAIR, claim.params(start=random.random()))
        locked_id, first_id = cursor.fetchone()
    if locked_id is None:
        # Nothing open (the worker is done), or every open pair in the window is being claimed.
        return _Pass(None, wait_for=first_id)
    return _reserved(claim.reserve(pair_id=locked_id, capped=True))


def _reserved(assignment: Assignment | None) -> _Pass:
    return _Pass(assignment) if assignment is not None else _Pass(None, retry=True)


@dataclass(frozen=True)
class _Claim:
    study_id: int
    worker: Worker
    overlap: int
    now: datetime
    expires_at: datetime
    a_left: bool

    def params(self, *, start: float) -> dict[str, Any]:
        return {
            "study": self.study_id,
            "worker": self.worker.pk,
            "overlap": self.overlap,
            "now": self.now,
            "start": start,
            "window": CLAIM_WINDOW,
        }

    def reserve(self, *, pair_id: int, capped: bool) -> Assignment | None:
        """Insert the reservation when the pair may still be taken; None when it may not."""
        public_id = uuid.uuid4()
        with connection.cursor() as cursor:
            cursor.execute(
                _RESERVE,
                {
                    "public_id": public_id,
                    "study": self.study_id,
                    "pair": pair_id,
                    "worker": self.worker.pk,
                    "a_left": self.a_left,
                    "now": self.now,
                    "expires_at": self.expires_at,
                    "overlap": self.overlap,
                    "capped": capped,
                },
            )
            row = cursor.fetchone()
        if row is None:
            return None
        assignment = Assignment(
            pk=row[0],
            public_id=public_id,
            study_id=self.study_id,
            pair_id=pair_id,
            worker=self.worker,
            a_left=self.a_left,
            status=Assignment.Status.RESERVED,
            reserved_at=self.now,
            expires_at=self.expires_at,
        )
        assignment._state.adding = False
        assignment._state.db = connection.alias
        return assignment
