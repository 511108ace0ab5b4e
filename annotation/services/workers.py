"""Writes about a worker: consent, gold checks, finishing, returning, blocking."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import Assignment, Worker
from annotation.selectors.work import worker_gold_score
from annotation.services.assignments import assignments_release


def worker_gold_check(*, worker: Worker) -> Worker.State:
    """Warn or block a worker whose gold accuracy fell under the study's thresholds.

    Expects to run inside the caller's transaction, after the judgment is saved. Applies only
    after the study's minimum number of gold judgments, so one slip does not block anyone.
    A blocked worker's reservations are released at once.
    """
    study = worker.study
    score = worker_gold_score(worker=worker)
    accuracy = score.accuracy
    if accuracy is None or score.checked < study.gold_min_items:
        return Worker.State(worker.state)
    if accuracy < study.gold_block_accuracy:
        new_state = Worker.State.BLOCKED
    elif accuracy < study.gold_warn_accuracy:
        new_state = Worker.State.WARNED
    else:
        new_state = Worker.State.ACTIVE
    # Only an active or warned worker moves between these three; done, returned and a
    # researcher's decisions stay as they are.
    changed = Worker.objects.filter(
        pk=worker.pk, state__in=[Worker.State.ACTIVE, Worker.State.WARNED]
    ).update(
        state=new_state,
        state_reason=f"Gold accuracy {score.correct}/{score.checked}.",
    )
    if changed:
        worker.state = new_state
        if new_state == Worker.State.BLOCKED:
            assignments_release(worker=worker)
    return Worker.State(worker.state)


@transaction.atomic
def worker_consent(*, worker: Worker) -> Worker:
    """Record that the worker read the instructions and agreed (idempotent)."""
    Worker.objects.filter(pk=worker.pk, consented_at__isnull=True).update(
        consented_at=timezone.now()
    )
    worker.refresh_from_db(fields=["consented_at"])
    return worker


@transaction.atomic
def worker_finish(*, worker: Worker) -> Worker:
    """Stop working: release reservations and mark the worker done (idempotent).

    Only a worker who is active or warned can finish; the completion code is shown by the view
    only when this worker has at least one saved judgment.
    """
    assignments_release(worker=worker)
    Worker.objects.filter(
        pk=worker.pk, state__in=[Worker.State.ACTIVE, Worker.State.WARNED]
    ).update(state=Worker.State.DONE, completed_at=timezone.now())
    worker.refresh_from_db(fields=["state", "completed_at"])
    return worker


@transaction.atomic
def worker_return(*, worker: Worker, reason: str) -> Worker:
    """Mark a worker as returned or timed out on the panel and release their reservations."""
    assignments_release(worker=worker)
    Worker.objects.filter(pk=worker.pk).exclude(state=Worker.State.BLOCKED).update(
        state=Worker.State.RETURNED, state_reason=reason
    )
    worker.refresh_from_db(fields=["state", "state_reason"])
    return worker


@transaction.atomic
def worker_block_set(*, worker: Worker, blocked: bool, reason: str) -> Worker:
    """Block or unblock a worker by a researcher's decision."""
    new_state = Worker.State.BLOCKED if blocked else Worker.State.ACTIVE
    Worker.objects.filter(pk=worker.pk).update(state=new_state, state_reason=reason)
    if blocked:
        assignments_release(worker=worker)
    worker.refresh_from_db(fields=["state", "state_reason"])
    return worker


@transaction.atomic
def workers_block(*, workers: QuerySet[Worker]) -> int:
    """Block the given workers from taking more pairs and release what they hold.

    Returns how many were not blocked yet.
    """
    changed = workers.exclude(state=Worker.State.BLOCKED).update(state=Worker.State.BLOCKED)
    Assignment.objects.filter(
        worker__in=workers.values("pk"), status=Assignment.Status.RESERVED
    ).update(status=Assignment.Status.RETURNED)
    return changed


def workers_unblock(*, workers: QuerySet[Worker]) -> int:
    """Let blocked workers work again (state active); return how many were blocked."""
    return workers.filter(state=Worker.State.BLOCKED).update(state=Worker.State.ACTIVE)
