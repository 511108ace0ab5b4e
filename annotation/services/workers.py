"""Writes about a worker: consent, gold checks, finishing, returning, blocking."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import Assignment, HumanJudgment, PayEntry, Worker
from annotation.selectors.work import worker_gold_score, worker_pairs_held_elsewhere
from annotation.services.assignments import assignments_release
from annotation.services.errors import WorkerExcluded


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
def worker_finish(*, worker: Worker, out_of_work: bool) -> Worker:
    """Stop working: release reservations and mark the worker done (idempotent).

    Only a worker who is active or warned can finish. The finish is full (the full completion
    code) when the worker reached the study's target, or when the study had no more work for
    them (`out_of_work`, from a claim that found nothing) and no pair is left that they could
    still take once others' reservations run out; otherwise it is partial (the partial code).
    A code is shown only when this worker has at least one saved judgment.
    """
    assignments_release(worker=worker)
    done = Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED).count()
    full = done >= worker.study.target_per_worker or (
        out_of_work and worker_pairs_held_elsewhere(worker=worker).pairs == 0
    )
    Worker.objects.filter(
        pk=worker.pk, state__in=[Worker.State.ACTIVE, Worker.State.WARNED]
    ).update(state=Worker.State.DONE, completed_at=timezone.now(), finished_full=full)
    worker.refresh_from_db(fields=["state", "completed_at", "finished_full"])
    return worker


def worker_completion_code(*, worker: Worker) -> str:
    """The code this worker earned: full, partial, or none (no judgment, or not done)."""
    if worker.state != Worker.State.DONE:
        return ""
    if not Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED).exists():
        return ""
    study = worker.study
    return study.completion_code if worker.finished_full else study.partial_completion_code


def worker_screened_out_code(*, worker: Worker) -> str:
    """The screened-out code of a blocked worker (empty when not blocked or the study has none)."""
    if worker.state != Worker.State.BLOCKED:
        return ""
    return worker.study.screened_out_code


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
    """Block or unblock a worker by a researcher's decision (an excluded worker stays blocked)."""
    if not blocked and Worker.objects.filter(pk=worker.pk, excluded=True).exists():
        raise WorkerExcluded("An excluded participant stays blocked.")
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


@transaction.atomic
def worker_exclude(*, worker: Worker, reason: str) -> int:
    """Exclude a participant from the analysis and from pay, in one step; return judgments hit.

    Marks the worker and every judgment of theirs `excluded` (the analysis reads only rows with
    excluded = False), blocks them and releases what they hold, and rejects their pending and
    approved (not yet paid) ledger entries with the reason. Needs a reason; idempotent.
    """
    reason = reason.strip()
    if not reason:
        raise WorkerExcluded("Give a reason for excluding this participant.")
    locked = Worker.objects.select_for_update().get(pk=worker.pk)
    assignments_release(worker=locked)
    Worker.objects.filter(pk=worker.pk).update(
        excluded=True,
        excluded_at=locked.excluded_at or timezone.now(),
        state=Worker.State.BLOCKED,
        state_reason=f"Excluded: {reason}",
    )
    judgments = HumanJudgment.objects.filter(worker=worker).update(excluded=True)
    PayEntry.objects.filter(
        worker=worker, status__in=[PayEntry.Status.PENDING, PayEntry.Status.APPROVED]
    ).update(status=PayEntry.Status.REJECTED, reason=f"Excluded: {reason}")
    worker.refresh_from_db(fields=["excluded", "excluded_at", "state", "state_reason"])
    return judgments
