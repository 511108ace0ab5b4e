"""Bonuses paid through Prolific's API, each batch paid at most once.

Prolific pays a bulk bonus in two calls: set up (POST /api/v1/submissions/bonus-payments/,
harmless to repeat: an unpaid set-up pays nothing) and pay (POST
/api/v1/bulk-bonus-payments/{id}/pay/, not idempotent: a second call pays everyone again). A
`ProlificBonusBatch` row carries the batch through, like a judge call: each step is claimed by a
conditional UPDATE (`WHERE status = old AND lease free`) that moves it forward and takes a lease,
no network call runs inside a transaction, and the pay call is made only from the one UPDATE
that moved the row from `created` to `paying`, which no later run can repeat:

- killed between set-up and recording Prolific's id: the row is still `creating`; once its lease
  runs out it is set up again (a new id; the first set-up is never paid);
- killed between pay and recording it: the row is `paying`; once its lease runs out it becomes
  `uncertain`, never paid again;
- a pay call that times out, fails to connect or answers 5xx: `uncertain` at once. Only a
  refusal that says nothing was paid (4xx) makes the batch `failed`.
An `uncertain` batch is shown as "possibly paid: check Prolific" with what to check; the
researcher marks it paid or not paid after looking. Lines of a batch count as already sent
(selectors.bonus) unless the batch failed, so nothing is owed twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.models import ProlificBonusBatch, ProlificBonusLine, Study
from annotation.prolific import ProlificError, ProlificUnavailable
from annotation.selectors.bonus import study_bonus_lines
from annotation.services.errors import AnnotationError
from annotation.services.prolific import prolific_client
from core.broker import BrokerUnavailable, task_send
from core.queues import Queue
from core.tasks import SoftTimeLimitExceeded, failure_reason

logger = logging.getLogger(__name__)

# How long one step may hold a batch; past it, another run takes over (see the module notes).
LEASE_SECONDS = 120
Status = ProlificBonusBatch.Status


class BonusBatchRefused(AnnotationError):
    code = "bonus_batch_refused"


def _csv(batch: ProlificBonusBatch) -> str:
    lines = batch.lines.select_related("worker").order_by("worker__external_id")
    return "\n".join(
        f"{line.worker.external_id},{Decimal(line.amount_cents) / 100:.2f}" for line in lines
    )


def bonus_batch_create(*, study: Study, user: object) -> ProlificBonusBatch:
    """Put every bonus due (selectors.bonus) into a new batch; refuse while one is on its way."""
    if not study.prolific_study_id or not study.prolific_token_encrypted:
        raise BonusBatchRefused("Connect the study to Prolific (token and study id) first.")
    due = [line for line in study_bonus_lines(study=study) if line.arithmetic.due_cents > 0]
    if not due:
        raise BonusBatchRefused("No bonus is due.")
    try:
        with transaction.atomic():
            batch = ProlificBonusBatch.objects.create(
                study=study,
                created_by_id=getattr(user, "pk", None),
                total_cents=sum(line.arithmetic.due_cents for line in due),
            )
            ProlificBonusLine.objects.bulk_create(
                ProlificBonusLine(
                    batch=batch, worker_id=line.worker_id, amount_cents=line.arithmetic.due_cents
                )
                for line in due
            )
    except IntegrityError as exc:
        raise BonusBatchRefused(
            "A bonus batch of this study is still on its way; wait for it to finish."
        ) from exc
    return batch


def _claim(batch_id: int, *, from_status: list[str], to_status: str) -> bool:
    """Move the batch forward and take the lease, if it is in `from_status` and not leased."""
    now = timezone.now()
    return bool(
        ProlificBonusBatch.objects.filter(pk=batch_id, status__in=from_status)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(
            status=to_status,
            lease_until=now + timedelta(seconds=LEASE_SECONDS),
            attempts=F("attempts") + 1,
        )
    )


def _finish(batch_id: int, *, status: str, **fields: object) -> None:
    ProlificBonusBatch.objects.filter(pk=batch_id).update(status=status, lease_until=None, **fields)


def bonus_batch_run(*, batch_id: int) -> str:
    """Take the batch as far as it can go now; return its status. Safe to run twice at once.

    Set up (pending, or creating past its lease), then pay (created). A batch left `paying`
    past its lease becomes uncertain. Never calls pay for a batch twice.
    """
    batch = ProlificBonusBatch.objects.select_related("study").get(pk=batch_id)
    now = timezone.now()
    # Killed after the pay call was claimed: Prolific may have paid. Never again.
    ProlificBonusBatch.objects.filter(
        pk=batch_id, status=Status.PAYING, lease_until__lt=now
    ).update(
        status=Status.UNCERTAIN,
        lease_until=None,
        error="The run that paid this batch stopped before it recorded the outcome.",
    )
    if _claim(batch_id, from_status=[Status.PENDING, Status.CREATING], to_status=Status.CREATING):
        try:
            prolific_id = prolific_client(study=batch.study).bonus_setup(
                study_id=batch.study.prolific_study_id, csv_bonuses=_csv(batch)
            )
        except ProlificUnavailable as exc:
            _finish(batch_id, status=Status.PENDING, error=exc.message)  # nothing is paid
            return Status.PENDING
        except SoftTimeLimitExceeded as exc:
            _finish(batch_id, status=Status.PENDING, error=failure_reason(exc))  # nothing is paid
            raise
        except ProlificError as exc:
            _finish(batch_id, status=Status.FAILED, error=exc.message)
            return Status.FAILED
        # Recorded before pay is ever called: the only way to the pay call is through `created`.
        ProlificBonusBatch.objects.filter(pk=batch_id, status=Status.CREATING).update(
            status=Status.CREATED, prolific_batch_id=prolific_id, lease_until=None
        )
    if _claim(batch_id, from_status=[Status.CREATED], to_status=Status.PAYING):
        prolific_id = ProlificBonusBatch.objects.values_list("prolific_batch_id", flat=True).get(
            pk=batch_id
        )
        try:
            prolific_client(study=batch.study).bonus_pay(prolific_id)
        except ProlificUnavailable as exc:
            logger.warning("Bonus batch %s: pay outcome unknown: %s", batch_id, exc.message)
            _finish(batch_id, status=Status.UNCERTAIN, error=exc.message)
            return Status.UNCERTAIN
        except SoftTimeLimitExceeded as exc:
            # The pay request may have reached Prolific: uncertain, never paid again.
            reason = f"{failure_reason(exc)}, waiting for Prolific's answer to pay"
            _finish(batch_id, status=Status.UNCERTAIN, error=reason)
            raise
        except ProlificError as exc:
            _finish(batch_id, status=Status.FAILED, error=exc.message)
            return Status.FAILED
        _finish(batch_id, status=Status.PAID, paid_at=timezone.now(), error="")
    return str(ProlificBonusBatch.objects.values_list("status", flat=True).get(pk=batch_id))


def bonus_batch_settle(*, batch: ProlificBonusBatch, paid: bool) -> None:
    """A researcher checked Prolific: mark an uncertain batch paid or not paid."""
    ProlificBonusBatch.objects.filter(pk=batch.pk, status=Status.UNCERTAIN).update(
        status=Status.PAID if paid else Status.FAILED,
        paid_at=timezone.now() if paid else None,
        error="Settled by a researcher after checking Prolific.",
    )


TASK_BATCH_RUN = "annotation.prolific_bonus_batch_run"


def bonus_batch_queue(*, batch: ProlificBonusBatch) -> None:
    """Ask a Celery worker to run the batch once the caller's transaction commits.

    A broker that does not answer only delays it: the periodic run (bonus_batches_run) takes
    every batch still on its way.
    """

    def send() -> None:
        try:
            task_send(TASK_BATCH_RUN, args=[batch.pk], queue=Queue.DEFAULT)
        except BrokerUnavailable as exc:
            logger.warning("Bonus batch %s waits for the periodic run: %s", batch.pk, exc)

    transaction.on_commit(send)


def bonus_batches_run() -> int:
    """Run every batch still on its way (the periodic task); return how many were looked at."""
    open_ids = list(
        ProlificBonusBatch.objects.filter(
            status__in=[Status.PENDING, Status.CREATING, Status.CREATED, Status.PAYING]
        ).values_list("pk", flat=True)
    )
    for batch_id in open_ids:
        bonus_batch_run(batch_id=batch_id)
    return len(open_ids)
