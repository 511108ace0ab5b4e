"""The payment ledger: approve, reject (only for failed checks), bonuses for gold accuracy."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from annotation.models import PayEntry, Study, Worker
from annotation.selectors.work import worker_gold_score
from annotation.services.errors import AnnotationError


class PayRefused(AnnotationError):
    code = "pay_refused"


def _failed_checks(worker: Worker) -> bool:
    """True when the worker's gold accuracy is under the study's block threshold."""
    score = worker_gold_score(worker=worker)
    accuracy = score.accuracy
    return (
        worker.state == Worker.State.BLOCKED
        or accuracy is not None
        and score.checked >= worker.study.gold_min_items
        and accuracy < worker.study.gold_block_accuracy
    )


@transaction.atomic
def pay_entries_review(*, worker: Worker, approve: bool, reason: str) -> int:
    """Approve or reject the worker's pending entries; return how many changed.

    Rejection follows Prolific's rule: only for failed attention or gold checks, with a reason.
    Changes only entries still pending (a conditional update), so a double submit does nothing.
    """
    if not approve:
        if not reason.strip():
            raise PayRefused("Give a reason for the rejection.")
        if not _failed_checks(worker):
            raise PayRefused(
                "Work can be rejected only for failed checks; this worker passed the gold checks."
            )
    return PayEntry.objects.filter(worker=worker, status=PayEntry.Status.PENDING).update(
        status=PayEntry.Status.APPROVED if approve else PayEntry.Status.REJECTED,
        reason=reason.strip(),
    )


@transaction.atomic
def pay_gold_bonuses_grant(*, study: Study, min_accuracy: Decimal, amount_cents: int) -> int:
    """Give a pending bonus to each worker whose gold accuracy reaches `min_accuracy`.

    At most one gold bonus per worker (a worker who already has one is skipped). Returns the
    number of bonuses granted.
    """
    if amount_cents <= 0:
        raise PayRefused("The bonus must be a positive amount of cents.")
    granted = 0
    workers = Worker.objects.select_related("study").filter(study=study, user__isnull=False)
    for worker in workers.exclude(pay_entries__kind=PayEntry.Kind.BONUS):
        score = worker_gold_score(worker=worker)
        if score.accuracy is None or score.checked < study.gold_min_items:
            continue
        if score.accuracy >= min_accuracy:
            PayEntry.objects.create(
                study=study,
                worker=worker,
                kind=PayEntry.Kind.BONUS,
                amount_cents=amount_cents,
                reason=f"Gold accuracy {score.correct}/{score.checked}.",
            )
            granted += 1
    return granted
