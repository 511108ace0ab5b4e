"""The assignment engine: which pair a worker rates next, and for how long it is theirs.

A pair "needs judgments" while its taken slots (submitted assignments plus reservations that have
not expired) are fewer than the study's overlap. Taken slots are counted from the assignment rows
each time, never kept as a counter. Claimers lock the pair row before they count, so two workers
can never both take the last slot; on PostgreSQL they lock with SKIP LOCKED and so never wait on
each other, falling back to waiting only when every open pair they could take is locked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import (
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Assignment, Pair, Study, Worker
from annotation.services.errors import StudyNotOpen, WorkerBlocked

# How many open pairs one claim looks at; the fewest-taken of them wins. Bounded so that a claim
# reads a few index pages whatever the size of the study.
CLAIM_WINDOW = 32
# How many times a claim starts over when a pair it locked filled up meanwhile.
CLAIM_PASSES = 20


def assignment_taken_q(*, now: datetime, prefix: str = "") -> Q:
    """Match assignments that hold a slot: submitted, or reserved and not yet expired."""
    return Q(**{f"{prefix}status": Assignment.Status.SUBMITTED}) | Q(
        **{f"{prefix}status": Assignment.Status.RESERVED, f"{prefix}expires_at__gt": now}
    )


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


@dataclass
class _Pass:
    assignment: Assignment | None
    busy_pair_ids: list[int]


def assignment_claim_next(*, worker: Worker) -> Assignment | None:
    """Reserve the next pair for a worker and return the assignment, or None when no work is left.

    A worker holding an open reservation gets that one back (pause and come back, back button,
    double click). Otherwise: a gold pair at the study's gold share (always during the
    qualification block), else the open pair with the fewest taken slots among a random window,
    ties broken by the pairs' random keys. Raises StudyNotOpen or WorkerBlocked.
    """
    skip_locked = connection.features.has_select_for_update_skip_locked
    wait_for: int | None = None
    for _ in range(CLAIM_PASSES):
        result = _claim_pass(worker=worker, skip_locked=skip_locked, wait_for=wait_for)
        if result.assignment is not None:
            return result.assignment
        if not result.busy_pair_ids:
            return None
        # Every open pair this worker could take is being claimed by someone else right now:
        # wait for one of them (claims are short) instead of wrongly saying "no work".
        wait_for = result.busy_pair_ids[0]
    return None


@transaction.atomic
def _claim_pass(*, worker: Worker, skip_locked: bool, wait_for: int | None) -> _Pass:
    """Try once to reserve a pair, under the worker's row lock and at most one waited pair lock."""
    now = timezone.now()
    # One round trip: lock the worker and read their assignment history with it.
    locked = (
        Worker.objects.select_for_update(of=("self",))
        .select_related("study")
        .annotate(
            n_submitted=_count_of_mine(Q(status=Assignment.Status.SUBMITTED)),
            n_shown=_count_of_mine(Q()),
            n_a_left=_count_of_mine(Q(a_left=True)),
            n_reserved=_count_of_mine(Q(status=Assignment.Status.RESERVED)),
        )
        .get(pk=worker.pk)
    )
    study = locked.study
    if study.status != Study.Status.LIVE:
        raise StudyNotOpen("This study is not taking judgments at the moment.")
    if locked.state == Worker.State.BLOCKED:
        raise WorkerBlocked(
            "You can't take more items in this study: too many check questions were answered "
            "incorrectly, or a researcher stopped your session after review. Thank you for "
            "your time; the work you already submitted is recorded."
        )
    if locked.state in (Worker.State.DONE, Worker.State.RETURNED):
        return _Pass(None, [])

    if locked.n_reserved:
        reserved = list(
            Assignment.objects.filter(worker=locked, status=Assignment.Status.RESERVED)
            .select_related("pair")
            .order_by("pk")
        )
        stale = [assignment.pk for assignment in reserved if assignment.expires_at <= now]
        if stale:
            Assignment.objects.filter(pk__in=stale, status=Assignment.Status.RESERVED).update(
                status=Assignment.Status.EXPIRED
            )
        held = next((a for a in reserved if a.expires_at > now), None)
        if held is not None:
            return _Pass(held, [])
    history = _History(submitted=locked.n_submitted, shown=locked.n_shown, a_left=locked.n_a_left)
    done = history.submitted
    if done >= study.target_per_worker:
        return _Pass(None, [])

    want_gold = done < study.qualification_items or random.random() < float(study.gold_share)
    if want_gold:
        gold = _gold_pair_for(study=study, worker=locked)
        if gold is not None:
            reserved_gold = _reserve(
                study=study, worker=locked, history=history, pair=gold, now=now
            )
            return _Pass(reserved_gold, [])

    # When regular work is gone the worker is done: gold pairs are only worth showing mixed in.
    return _claim_open_pair(
        study=study,
        worker=locked,
        history=history,
        now=now,
        skip_locked=skip_locked,
        wait_for=wait_for,
    )


def _claim_open_pair(
    *,
    study: Study,
    worker: Worker,
    history: _History,
    now: datetime,
    skip_locked: bool,
    wait_for: int | None,
) -> _Pass:
    candidates = _open_pairs_window(study=study, worker=worker, now=now, limit=CLAIM_WINDOW)
    # Fewest taken first; the window already comes in random order, and sorted() is stable.
    order = [pk for pk, _ in sorted(candidates, key=lambda row: row[1])]
    if wait_for is not None:
        order = [wait_for] + [pk for pk in order if pk != wait_for]
    busy: list[int] = []
    for pair_id in order:
        pairs = Pair.objects.filter(pk=pair_id, study=study).order_by("pk")
        if pair_id == wait_for or not skip_locked:
            pair = pairs.select_for_update().first()
        else:
            pair = pairs.select_for_update(skip_locked=True).first()
        if pair is None:
            busy.append(pair_id)
            continue
        # Counted in a new statement, after the lock: sees every claim committed before it.
        slots = Assignment.objects.filter(pair=pair).aggregate(
            taken=Count("pk", filter=assignment_taken_q(now=now)),
            seen=Count("pk", filter=Q(worker=worker)),
            stale=Count("pk", filter=Q(status=Assignment.Status.RESERVED, expires_at__lte=now)),
        )
        if slots["taken"] >= study.overlap or slots["seen"]:
            continue
        if slots["stale"]:
            # Holding the pair's lock, bring its stale reservations' status in line.
            Assignment.objects.filter(
                pair=pair, status=Assignment.Status.RESERVED, expires_at__lte=now
            ).update(status=Assignment.Status.EXPIRED)
        return _Pass(_reserve(study=study, worker=worker, history=history, pair=pair, now=now), [])
    return _Pass(None, busy)


def _not_seen_by(worker: Worker) -> Exists:
    return Exists(Assignment.objects.filter(pair=OuterRef("pk"), worker=worker))


def _walk_from_random_start(queryset: QuerySet[Pair], *, limit: int) -> list[tuple[int, int]]:
    """Read up to `limit` rows of (pk, taken) in shuffle-key order, starting at a random key."""
    start = random.random()
    ordered = queryset.order_by("shuffle_key")
    columns = ("pk", "taken")  # "taken" is an annotation the caller adds
    rows: list[tuple[int, int]] = list(
        ordered.filter(shuffle_key__gte=start).values_list(*columns)[:limit]
    )
    if len(rows) < limit:
        rows += ordered.filter(shuffle_key__lt=start).values_list(*columns)[: limit - len(rows)]
    return rows


def _open_pairs_window(
    *, study: Study, worker: Worker, now: datetime, limit: int
) -> list[tuple[int, int]]:
    """Open regular pairs the worker has never had, as (pk, taken), walked from a random key."""
    taken = (
        Assignment.objects.filter(pair=OuterRef("pk"))
        .filter(assignment_taken_q(now=now))
        .order_by()
        .values("pair")
        .annotate(n=Count("pk"))
        .values("n")
    )
    queryset = (
        Pair.objects.filter(study=study, is_gold=False)
        .annotate(taken=Coalesce(Subquery(taken, output_field=IntegerField()), 0))
        .filter(taken__lt=study.overlap)
        .exclude(_not_seen_by(worker))
    )
    return _walk_from_random_start(queryset, limit=limit)


def _gold_pair_for(*, study: Study, worker: Worker) -> Pair | None:
    """A random gold pair the worker has never had. Gold pairs go to everyone: no overlap cap."""
    queryset = (
        Pair.objects.filter(study=study, is_gold=True)
        .exclude(_not_seen_by(worker))
        .annotate(taken=Value(0, output_field=IntegerField()))
    )
    rows = _walk_from_random_start(queryset, limit=1)
    return Pair.objects.get(pk=rows[0][0]) if rows else None


@dataclass(frozen=True)
class _History:
    submitted: int
    shown: int
    a_left: int


def _count_of_mine(condition: Q) -> Coalesce:
    """A scalar subquery: how many of the outer worker's assignments match `condition`."""
    counted = (
        Assignment.objects.filter(condition, worker=OuterRef("pk"))
        .order_by()
        .values("worker")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _reserve(
    *, study: Study, worker: Worker, history: _History, pair: Pair, now: datetime
) -> Assignment:
    return Assignment.objects.create(
        study=study,
        pair=pair,
        worker=worker,
        a_left=_next_a_left(history=history),
        reserved_at=now,
        expires_at=now + timedelta(seconds=study.time_limit_seconds),
    )


def _next_a_left(*, history: _History) -> bool:
    """Counterbalance the shown order per worker: whichever side is behind, random when even."""
    left, right = history.a_left, history.shown - history.a_left
    if left != right:
        return left < right
    return random.random() < 0.5
