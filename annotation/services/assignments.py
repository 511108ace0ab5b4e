"""The assignment engine: which pair a worker rates next, and for how long it is theirs.

A pair "needs judgments" while its taken slots (submitted assignments plus reservations that have
not expired) are fewer than the study's overlap. Taken slots are counted from the assignment rows
each time, never kept as a counter. Claimers lock the pair row before they count, so two workers
can never both take the last slot; they lock with SKIP LOCKED and so never wait on each other,
falling back to waiting only when every open pair they could take is locked.

A claim pass is one statement: the PL/pgSQL function annotation_claim_pass (its source, with its
lock notes: annotation/sql/annotation_claim_pass.sql), which takes the locks described above
_claim_pass and returns the reservation with the worker's submitted count, so the caller needs no
count of its own for progress. Its statements are planned for each call's own values
(PostgreSQL's default plan mode): generic plans, tried in migration annotation/0010, made the
claim slower on a study of a million pairs and were undone by 0011. An active study's draws walk
the pairs by priority key (see the file), and each of its reservations records its propensity in
the row (Assignment.propensity; the Assignment the claim returns does not carry it).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from annotation.models import Assignment, Worker
from annotation.services.errors import (
    AssignmentClosed,
    AssignmentNotFound,
    JudgmentInvalid,
    StudyNotOpen,
    WorkerBlocked,
)
from core.db.prepared import prepared_cursor
from core.db.rows import instance_saved

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


@dataclass(frozen=True)
class Claimed:
    """What a claim gives the annotator's page: the assignment (None: no work for the worker) and
    their progress, counted by the claim itself under the worker's lock."""

    assignment: Assignment | None
    done: int
    target: int


def assignment_claim(*, worker: Worker) -> Claimed:
    """Reserve the next pair for a worker; return it with the worker's progress.

    A worker holding an open reservation gets that one back (pause and come back, back button,
    double click). Otherwise: a gold pair at the study's gold share (always during the
    qualification block), else the open pair with the fewest taken slots among a random window,
    ties broken by the pairs' random keys. Raises StudyNotOpen or WorkerBlocked.

    Each pass is one statement, so outside a transaction it commits (and lets go of its locks)
    on its own; called inside one, the locks are held until that transaction ends.
    """
    wait_for: int | None = None
    done, target = 0, worker.study.target_per_worker
    for _ in range(CLAIM_PASSES):
        result = _claim_pass(worker=worker, wait_for=wait_for)
        done, target = result.done, result.target
        if result.assignment is not None or result.outcome == "none":
            return Claimed(assignment=result.assignment, done=done, target=target)
        # Every open pair this worker could take was being claimed by someone else (wait for one
        # of them: claims are short), or a concurrent claim filled the chosen pair (try again);
        # neither means "no work".
        wait_for = result.wait_for
    return Claimed(assignment=None, done=done, target=target)


def assignment_claim_next(*, worker: Worker) -> Assignment | None:
    """Reserve the next pair for a worker (see assignment_claim); None when no work is left."""
    return assignment_claim(worker=worker).assignment


# One pass of the claim: SELECT annotation_claim_pass(...), a PL/pgSQL function
# (annotation/sql/annotation_claim_pass.sql) whose statements each read a fresh snapshot
# (READ COMMITTED, VOLATILE).
#
# Locks taken, in this order, until the pass's transaction commits:
#   1. FOR UPDATE on the worker's row (annotation_worker): one worker's claims run one at a time.
#      The worker's own assignments are counted by the next statement, after the lock, so a
#      second request of the same worker (double click) sees the first one's reservation and
#      gets it back.
#   2. FOR UPDATE SKIP LOCKED on at most one open pair row (annotation_pair): two claimers never
#      count the same pair's slots at once, and never wait on each other. Only when every open
#      pair in the window is locked does the next pass wait (plain FOR UPDATE) for the first.
# Gold pairs have no overlap cap and are not locked.
#
# The slots of the locked pair are counted again by the INSERT, a later statement: its snapshot
# sees every claim committed before the lock was ours (the statement that locked the pair may
# have started reading before such a claim committed); if the pair filled up meanwhile the pass
# answers "retry". The INSERT also refuses when the worker meanwhile holds an open reservation.
# Stale reservations (past expires_at, still marked reserved) of the worker and of the pair get
# their stored status set to expired on the way; they stopped counting at expires_at already.

_CLAIM_PASS = (
    "SELECT * FROM annotation_claim_pass(%(worker)s, %(now)s, %(public_id)s, %(wait_for)s, "
    "%(gold_roll)s, %(side_roll)s, %(gold_start)s, %(open_start)s, %(window)s, "
    "%(select_roll)s)"
)


@dataclass(frozen=True)
class _Pass:
    outcome: str
    assignment: Assignment | None
    done: int
    target: int
    # When no claim was made and outcome is "busy": the pair to wait for.
    wait_for: int | None = None


BLOCKED_MESSAGE = (
    "You can't take more items in this study: too many check questions were answered "
    "incorrectly, or a researcher stopped your session after review. Thank you for your time; "
    "the work you already submitted is recorded."
)


def _claim_pass(*, worker: Worker, wait_for: int | None) -> _Pass:
    """Try once to reserve a pair: see the lock notes above."""
    with prepared_cursor() as cursor:
        cursor.execute(
            _CLAIM_PASS,
            {
                "worker": worker.pk,
                "now": timezone.now(),
                "public_id": uuid.uuid4(),
                "wait_for": wait_for,
                "gold_roll": random.random(),
                "side_roll": random.random(),
                "gold_start": random.random(),
                "open_start": random.random(),
                "window": CLAIM_WINDOW,
                # Active studies: below the uniform share, the draw is uniform.
                "select_roll": random.random(),
            },
        )
        row = cursor.fetchone()
    outcome, pk, public_id, pair_id, a_left, reserved_at, expires_at = row[:7]
    first_busy, done, target, study_id = row[7:]
    if outcome == "missing":
        raise Worker.DoesNotExist(f"Worker {worker.pk} does not exist.")
    if outcome == "not_live":
        raise StudyNotOpen("This study is not taking judgments at the moment.")
    if outcome == "blocked":
        raise WorkerBlocked(BLOCKED_MESSAGE)
    assignment = None
    if outcome in ("held", "reserved"):
        assignment = instance_saved(
            Assignment,
            pk=pk,
            public_id=public_id,
            study_id=study_id,
            pair_id=pair_id,
            worker=worker,
            a_left=a_left,
            status=Assignment.Status.RESERVED,
            reserved_at=reserved_at,
            expires_at=expires_at,
        )
    return _Pass(outcome, assignment, done=done, target=target, wait_for=first_busy)


def assignment_skip(*, worker: Worker, public_id: uuid.UUID, reason: str) -> Assignment:
    """Skip one of the worker's reserved items with a reason: its slot goes back to the pool
    for someone else (the claim counts only reserved and submitted assignments), the worker is
    never offered the pair again (the claim skips pairs a worker had), and nothing is paid.

    One conditional UPDATE (status reserved -> skipped); a second skip of the same item answers
    the first one's row, so a double click is harmless. Raises AssignmentNotFound for an item
    that is not the worker's, AssignmentClosed for one already answered or released, and
    JudgmentInvalid for a reason that is not one of Assignment.SkipReason."""
    if reason not in Assignment.SkipReason.values:
        choices = ", ".join(Assignment.SkipReason.values)
        raise JudgmentInvalid(
            f"Choose why you skip this item (one of: {choices}).", field="skip_reason"
        )
    mine = Assignment.objects.filter(public_id=public_id, worker=worker)
    changed = mine.filter(status=Assignment.Status.RESERVED).update(
        status=Assignment.Status.SKIPPED, skip_reason=reason, skipped_at=timezone.now()
    )
    assignment = mine.first()
    if assignment is None:
        raise AssignmentNotFound("No such item.")
    if not changed and assignment.status != Assignment.Status.SKIPPED:
        if assignment.status == Assignment.Status.SUBMITTED:
            raise AssignmentClosed("You already answered this item; it cannot be skipped.")
        raise AssignmentClosed("This item is no longer yours to skip; here is the next one.")
    return assignment
