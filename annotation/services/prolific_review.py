"""Reviewing Prolific submissions from Concord: approve, reject, ask to return, reconcile.

Each decision is made on Prolific first, through its API, and only then written to Concord's
ledger, so Concord never records an approval or a rejection Prolific did not take: a call that
fails leaves Concord as it was and says why, participant by participant. No call runs inside a
database transaction.

- Approve: one bulk-approve request per 1,000 submissions (Prolific's advice), then the
  participants' pending pay entries are approved (services.pay's conditional update).
- Reject: Prolific has no bulk reject, so one transition per submission, each with one of
  Prolific's rejection categories and the message to the participant Prolific requires (at least
  100 characters); then the participant's pending entries are rejected with that reason.
- Return: a researcher cannot return a submission; Prolific messages the participant asking them
  to (request-return, with reasons). Concord records when it asked; the return itself arrives
  with the next reconciliation.
- Reconcile (a button on the workers page, and the periodic task every few minutes): read the
  study's submissions and store each participant's status beside Concord's. What a researcher
  decided on Prolific's own site is carried over to entries still pending here: APPROVED approves
  them, REJECTED rejects them; RETURNED and TIMED-OUT mark the worker returned (their
  reservations go back). A decision already taken in Concord is never overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import PayEntry, Study, Worker
from annotation.prolific import (
    BULK_APPROVE_MAX,
    REJECTION_CATEGORIES,
    REJECTION_MESSAGE_MIN,
    ProlificError,
)
from annotation.services.errors import AnnotationError
from annotation.services.prolific import prolific_client
from annotation.services.workers import worker_return

logger = logging.getLogger(__name__)

# Prolific's submission statuses after which the participant has left the study unpaid.
LEFT_STATUSES = frozenset({"RETURNED", "TIMED-OUT"})


class ReviewRefused(AnnotationError):
    code = "prolific_review_refused"


@dataclass
class ReviewOutcome:
    """What one review action did: the participants it changed, and each one it could not."""

    done: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    entries: int = 0


@dataclass(frozen=True)
class ReconcileOutcome:
    read: int
    changed: int
    returned: int
    approved_entries: int
    rejected_entries: int
    not_here: int


def _connected(study: Study) -> None:
    if not study.prolific_token_encrypted or not study.prolific_study_id:
        raise ReviewRefused(
            "Connect the study to Prolific first (its API token and study id, on the Prolific "
            "connection page)."
        )


def _label(worker: Worker) -> str:
    return f"prolific:{worker.external_id}"


def _reviewable(study: Study, worker_ids: Iterable[int]) -> tuple[list[Worker], ReviewOutcome]:
    """The study's Prolific workers among `worker_ids` that have a submission id to act on."""
    _connected(study)
    ids = sorted({int(pk) for pk in worker_ids})
    if not ids:
        raise ReviewRefused("Tick at least one participant.")
    outcome = ReviewOutcome()
    workers = []
    found = list(Worker.objects.filter(study=study, pk__in=ids).order_by("external_id"))
    if not found:
        raise ReviewRefused("None of the ticked participants is in this study.")
    for worker in found:
        if worker.panel != Worker.Panel.PROLIFIC:
            outcome.failed.append((str(worker), "not a Prolific participant"))
        elif not worker.panel_session_id:
            outcome.failed.append(
                (_label(worker), "no SESSION_ID was recorded at entry: review them on Prolific")
            )
        else:
            workers.append(worker)
    return workers, outcome


def _entries_decide(workers: list[Worker], *, status: str, reason: str) -> int:
    return PayEntry.objects.filter(worker__in=workers, status=PayEntry.Status.PENDING).update(
        status=status, reason=reason
    )


def _status_set(worker: Worker, status: str) -> None:
    Worker.objects.filter(pk=worker.pk).update(
        prolific_status=status, prolific_status_at=timezone.now()
    )


def submissions_approve(*, study: Study, worker_ids: Iterable[int], user: object) -> ReviewOutcome:
    """Approve the participants' submissions on Prolific, then their pending pay here."""
    workers, outcome = _reviewable(study, worker_ids)
    client = prolific_client(study=study)
    approved: list[Worker] = []
    for start in range(0, len(workers), BULK_APPROVE_MAX):
        chunk = workers[start : start + BULK_APPROVE_MAX]
        try:
            client.submissions_bulk_approve([w.panel_session_id for w in chunk])
        except ProlificError as exc:
            outcome.failed.extend((_label(w), exc.message) for w in chunk)
            continue
        approved.extend(chunk)
    with transaction.atomic():
        outcome.entries = _entries_decide(
            approved, status=PayEntry.Status.APPROVED, reason=f"Approved on Prolific by {user}."
        )
        for worker in approved:
            # Prolific approves in the background: the next reconciliation reads the outcome.
            _status_set(worker, "APPROVED")
    outcome.done = [_label(w) for w in approved]
    return outcome


def rejection_check(*, category: str, message: str) -> str:
    """The message, stripped, if Prolific would take this rejection; ReviewRefused otherwise."""
    if category not in REJECTION_CATEGORIES:
        raise ReviewRefused("Choose one of Prolific's rejection categories.")
    message = " ".join(message.split())
    if len(message) < REJECTION_MESSAGE_MIN:
        raise ReviewRefused(
            f"Prolific requires a message to the participant of at least "
            f"{REJECTION_MESSAGE_MIN} characters saying why; this one has {len(message)}."
        )
    return message


def submissions_reject(
    *, study: Study, worker_ids: Iterable[int], category: str, message: str, user: object
) -> ReviewOutcome:
    """Reject each submission on Prolific (one call each), then the participant's pending pay."""
    message = rejection_check(category=category, message=message)
    workers, outcome = _reviewable(study, worker_ids)
    client = prolific_client(study=study)
    reason = f"Rejected on Prolific by {user} ({REJECTION_CATEGORIES[category]}): {message}"
    for worker in workers:
        try:
            submission = client.submission_transition(
                worker.panel_session_id,
                action="REJECT",
                message=message,
                rejection_category=category,
            )
        except ProlificError as exc:
            outcome.failed.append((_label(worker), exc.message))
            continue
        with transaction.atomic():
            outcome.entries += _entries_decide(
                [worker], status=PayEntry.Status.REJECTED, reason=reason
            )
            _status_set(worker, submission.status or "REJECTED")
        outcome.done.append(_label(worker))
    return outcome


def submissions_return_request(
    *, study: Study, worker_ids: Iterable[int], reasons: list[str]
) -> ReviewOutcome:
    """Ask Prolific to ask each participant to return their submission (one call each)."""
    reasons = [" ".join(r.split())[:300] for r in reasons if r.strip()]
    if not reasons:
        raise ReviewRefused("Give at least one reason for asking them to return it.")
    workers, outcome = _reviewable(study, worker_ids)
    client = prolific_client(study=study)
    for worker in workers:
        try:
            client.submission_request_return(worker.panel_session_id, reasons=reasons)
        except ProlificError as exc:
            outcome.failed.append((_label(worker), exc.message))
            continue
        Worker.objects.filter(pk=worker.pk).update(prolific_return_requested_at=timezone.now())
        outcome.done.append(_label(worker))
    return outcome


def submissions_reconcile(*, study: Study) -> ReconcileOutcome:
    """Read the study's submissions from Prolific and bring Concord in line (module notes).

    Raises ProlificError (nothing changed) when Prolific cannot be read.
    """
    _connected(study)
    submissions = prolific_client(study=study).submissions_list(study.prolific_study_id)
    workers = list(Worker.objects.filter(study=study, panel=Worker.Panel.PROLIFIC))
    by_session = {w.panel_session_id: w for w in workers if w.panel_session_id}
    by_participant = {w.external_id: w for w in workers}
    now = timezone.now()
    changed = returned = approved = rejected = not_here = 0
    for submission in submissions:
        worker = by_session.get(submission.id)
        if worker is None:
            worker = by_participant.get(submission.participant_id)
            if worker is not None and worker.panel_session_id not in ("", submission.id):
                worker = None  # an older or other submission of theirs: not the one here
        if worker is None:
            not_here += 1  # started on Prolific, never entered Concord (or not yet)
            continue
        with transaction.atomic():
            if worker.prolific_status != submission.status:
                changed += 1
            Worker.objects.filter(pk=worker.pk).update(
                prolific_status=submission.status, prolific_status_at=now
            )
            if submission.status == "APPROVED":
                approved += _entries_decide(
                    [worker], status=PayEntry.Status.APPROVED, reason="Approved on Prolific."
                )
            elif submission.status == "REJECTED":
                rejected += _entries_decide(
                    [worker], status=PayEntry.Status.REJECTED, reason="Rejected on Prolific."
                )
        if submission.status in LEFT_STATUSES and worker.state not in (
            Worker.State.RETURNED,
            Worker.State.BLOCKED,
        ):
            worker_return(worker=worker, reason=f"{submission.status.capitalize()} on Prolific.")
            returned += 1
    Study.objects.filter(pk=study.pk).update(prolific_reconciled_at=now)
    study.prolific_reconciled_at = now
    return ReconcileOutcome(
        read=len(submissions),
        changed=changed,
        returned=returned,
        approved_entries=approved,
        rejected_entries=rejected,
        not_here=not_here,
    )


def submissions_reconcile_all() -> int:
    """Reconcile every connected study with Prolific participants (the periodic task).

    A study Prolific cannot answer for is logged and left for the next run; the others go on.
    Returns how many studies were reconciled.
    """
    studies = (
        Study.objects.exclude(Q(prolific_token_encrypted="") | Q(prolific_study_id=""))
        .filter(workers__panel=Worker.Panel.PROLIFIC)
        .exclude(status=Study.Status.DRAFT)
        .distinct()
    )
    done = 0
    for study in studies:
        try:
            submissions_reconcile(study=study)
        except ProlificError as exc:
            logger.warning("Prolific reconciliation of study %s failed: %s", study.pk, exc.message)
            continue
        done += 1
    return done
