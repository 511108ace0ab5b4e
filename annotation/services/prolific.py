"""A study's connection to Prolific: its API token, the linked Prolific study, verified entry.

The token is stored as judge keys are (core.secretbox: Fernet under a key derived from
SECRET_KEY, with a purpose of its own); it is decrypted only to make a call, and never shown,
logged or exported. No call is made inside a database transaction.

Verified entry (entry_verify): with a token, an entrant's SESSION_ID must be a submission of the
linked Prolific study, for this PROLIFIC_PID, in an active state, before they get a worker row,
so a made-up SESSION_ID can neither enter nor bind the participant's id and lock the real
participant out. One look-up per new participant: a worker already verified with this SESSION_ID
enters without one, and a refused SESSION_ID is remembered for a few minutes (Django's cache),
so a flood of fabricated entrants does not become a flood of API calls. While Prolific cannot
answer, at most the study's `prolific_unverified_max` entrants are let in unverified (marked on
the worker); `unverified_recheck` checks them later and excludes those who were not real.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from annotation.models import Study, Worker
from annotation.panels import Participant
from annotation.prolific import (
    ProlificClient,
    ProlificError,
    ProlificNotFound,
    ProlificStudy,
    ProlificSubmission,
    ProlificTokenRefused,
)
from annotation.services.errors import EntryRefused
from annotation.services.workers import worker_exclude
from core.broker import task_send
from core.probes import Probe, probe_detail, probe_finish, probe_pending, probe_start, probe_state
from core.queues import Queue
from core.secretbox import InvalidToken, secret_clean, secret_decrypt, secret_encrypt

logger = logging.getLogger(__name__)

_PURPOSE = b"concord.annotation.prolific-token.v1"
MAX_TOKEN_LENGTH = 500
# Submission statuses in which a participant is taking the study now.
ACTIVE_STATUSES = frozenset({"ACTIVE"})
# How long a SESSION_ID that Prolific did not confirm is refused without asking again.
REFUSED_CACHE_SECONDS = 600
# What a refused entrant reads: nothing of the study, nothing of why.
NOT_VERIFIED = (
    "We could not confirm this link with Prolific. Please open the study again from your "
    "Prolific account."
)
OUTAGE_FULL = (
    "We cannot confirm new participants with Prolific at the moment. Please try again in a few "
    "minutes."
)


class ProlificNotConnected(ProlificError):
    """The study has no usable token (none pasted, or SECRET_KEY changed since)."""


def prolific_token_set(*, study: Study, token: str) -> None:
    """Store a pasted token encrypted, replacing any earlier one. ValueError for a bad paste."""
    encrypted = secret_encrypt(
        secret_clean(token, max_length=MAX_TOKEN_LENGTH, what="token"), purpose=_PURPOSE
    )
    now = timezone.now()
    Study.objects.filter(pk=study.pk).update(
        prolific_token_encrypted=encrypted, prolific_token_set_at=now
    )
    study.prolific_token_encrypted, study.prolific_token_set_at = encrypted, now


def prolific_token_clear(*, study: Study) -> None:
    """Forget the study's token: entry goes back to unverified."""
    Study.objects.filter(pk=study.pk).update(
        prolific_token_encrypted="", prolific_token_set_at=None
    )
    study.prolific_token_encrypted, study.prolific_token_set_at = "", None


def prolific_client(*, study: Study) -> ProlificClient:
    """A client with the study's token; ProlificNotConnected when there is none to read."""
    if not study.prolific_token_encrypted:
        raise ProlificNotConnected("No Prolific API token is stored for this study.")
    try:
        token = secret_decrypt(study.prolific_token_encrypted, purpose=_PURPOSE)
    except InvalidToken as exc:
        raise ProlificNotConnected(
            "The stored Prolific token cannot be read (SECRET_KEY changed since it was "
            "stored); paste it again."
        ) from exc
    return ProlificClient(token=token)


def prolific_token_source(*, study: Study) -> str:
    """Where the token stands, in words, without the token."""
    if not study.prolific_token_encrypted:
        return "no token"
    when = study.prolific_token_set_at
    return f"a token pasted{f' on {when:%Y-%m-%d %H:%M} UTC' if when else ''}, stored encrypted"


def prolific_connection_test(*, study: Study, prolific_study_id: str = "") -> ProlificStudy:
    """Read the linked Prolific study with the stored token; keep its places and status.

    Raises ProlificError (ProlificTokenRefused for a wrong token, ProlificNotFound for a study
    this token cannot see) with a message for the researcher.
    """
    study_id = prolific_study_id or study.prolific_study_id
    if not study_id:
        raise ProlificError("Set the Prolific study id first (from the study's URL on Prolific).")
    found = prolific_client(study=study).study_get(study_id)
    Study.objects.filter(pk=study.pk).update(
        prolific_places=found.places, prolific_study_status=found.status
    )
    study.prolific_places, study.prolific_study_status = found.places, found.status
    return found


TASK_PROLIFIC_TEST = "annotation.prolific_connection_test"
PROLIFIC_PROBE = "prolific-test"
# How long a queued test may wait for a worker before it counts as lost (beside its timeout).
PROLIFIC_TEST_QUEUE_GRACE_SECONDS = 60.0


def prolific_connection_test_start(*, study: Study, prolific_study_id: str = "") -> Probe:
    """Queue a Prolific connection test of the study for a worker (core.probes), or return the
    one already pending (then nothing is queued). Raise BrokerUnavailable when the broker
    refuses the task."""
    return probe_start(
        kind=PROLIFIC_PROBE,
        subject=study.pk,
        pending_seconds=4 * settings.PROLIFIC_API_TIMEOUT_SECONDS
        + PROLIFIC_TEST_QUEUE_GRACE_SECONDS,
        send=lambda: task_send(TASK_PROLIFIC_TEST, args=[study.pk], queue=Queue.DEFAULT),
        detail=prolific_study_id.strip(),
    )


def prolific_connection_test_run(*, study_id: int) -> bool:
    """The worker's side: make the study's pending Prolific test and store its answer; False
    when none is pending."""
    probe_id = probe_pending(kind=PROLIFIC_PROBE, subject=study_id)
    if probe_id is None:
        return False
    wanted = probe_detail(kind=PROLIFIC_PROBE, subject=study_id, probe_id=probe_id)
    study = Study.objects.filter(pk=study_id).first()
    answer: dict[str, object]
    if study is None:
        answer = {"ok": False, "message": "The study no longer exists."}
    else:
        try:
            found = prolific_connection_test(study=study, prolific_study_id=wanted)
        except (ProlificError, ValueError) as exc:
            answer = {"ok": False, "message": getattr(exc, "message", str(exc))}
        else:
            answer = {
                "ok": True,
                "message": f"Connected to Prolific: study {found.name!r} ({found.id}), "
                f"{found.status}, {found.places} places ({found.places_taken} taken).",
            }
    probe_finish(kind=PROLIFIC_PROBE, subject=study_id, probe_id=probe_id, answer=answer)
    return True


def prolific_connection_test_pending(*, study: Study) -> str | None:
    """The id of the study's Prolific test that is pending now, if any."""
    return probe_pending(kind=PROLIFIC_PROBE, subject=study.pk)


def prolific_connection_test_state(*, study: Study, probe_id: str) -> dict[str, Any]:
    """The state of one of the study's Prolific tests: pending, done (ok and message) or lost."""
    return probe_state(kind=PROLIFIC_PROBE, subject=study.pk, probe_id=probe_id)


def prolific_study_link(*, study: Study, prolific_study_id: str) -> ProlificStudy:
    """Link the study to an existing Prolific study, after reading it with the token."""
    prolific_study_id = prolific_study_id.strip()
    try:
        found = prolific_connection_test(study=study, prolific_study_id=prolific_study_id)
    except ProlificNotFound as exc:
        raise ProlificNotFound(
            f"Prolific has no study {prolific_study_id!r} that this token can see.", status=404
        ) from exc
    Study.objects.filter(pk=study.pk).update(prolific_study_id=found.id or prolific_study_id)
    study.prolific_study_id = found.id or prolific_study_id
    return found


def _refused_key(study: Study, session_id: str) -> str:
    digest = hashlib.sha256(f"{study.pk}:{session_id}".encode()).hexdigest()
    return f"concord:prolific:refused:{digest}"


def _confirms(submission: ProlificSubmission, *, study: Study, participant: Participant) -> bool:
    return (
        submission.id == participant.panel_session_id
        and submission.study_id == study.prolific_study_id
        and submission.participant_id == participant.external_id
        and submission.status in ACTIVE_STATUSES
    )


def entry_verify(*, study: Study, participant: Participant) -> Worker.Verification:
    """Check a Prolific entrant against Prolific before any worker row is made or bound.

    Returns NONE without a token (entry as before: unverified, said on the checklist),
    VERIFIED, or UNVERIFIED while Prolific cannot answer and the study's outage allowance is not
    used up. Raises EntryRefused (saying nothing of the study) for a SESSION_ID that is not an
    active submission of this Prolific study for this PROLIFIC_PID, and when the allowance is
    used up. Outside any transaction: it may call the API.
    """
    if not study.prolific_token_encrypted:
        return Worker.Verification.NONE
    session_id = participant.panel_session_id
    known = Worker.objects.filter(
        study=study,
        panel=Worker.Panel.PROLIFIC,
        external_id=participant.external_id,
        panel_session_id=session_id,
        prolific_verification=Worker.Verification.VERIFIED,
    ).exists()
    if known:
        return Worker.Verification.VERIFIED  # checked when they first came: no new look-up
    if cache.get(_refused_key(study, session_id)):
        raise EntryRefused(NOT_VERIFIED)
    try:
        submission = prolific_client(study=study).submission_get(session_id)
    except ProlificNotFound as exc:
        cache.set(_refused_key(study, session_id), 1, timeout=REFUSED_CACHE_SECONDS)
        raise EntryRefused(NOT_VERIFIED) from exc
    except (ProlificError, ValueError) as exc:
        # Prolific is down, slow, or refuses our token: nothing is known about this entrant.
        logger.warning("Prolific look-up failed for study %s: %s", study.pk, exc)
        if isinstance(exc, ProlificTokenRefused):
            logger.warning("Study %s: Prolific refused its token; entry degrades", study.pk)
        let_in = Worker.objects.filter(
            study=study, prolific_verification=Worker.Verification.UNVERIFIED
        ).count()
        if let_in >= study.prolific_unverified_max:
            raise EntryRefused(OUTAGE_FULL) from exc
        return Worker.Verification.UNVERIFIED
    if not _confirms(submission, study=study, participant=participant):
        cache.set(_refused_key(study, session_id), 1, timeout=REFUSED_CACHE_SECONDS)
        raise EntryRefused(NOT_VERIFIED)
    return Worker.Verification.VERIFIED


def entry_places_check(*, study: Study, participant: Participant) -> None:
    """Refuse a new participant once the study's Prolific places are taken by workers here.

    A participant who already has a worker row comes back in; returned workers free a place.
    """
    if study.prolific_places is None:
        return
    if Worker.objects.filter(
        study=study, panel=Worker.Panel.PROLIFIC, external_id=participant.external_id
    ).exists():
        return
    taken = (
        Worker.objects.filter(study=study, panel=Worker.Panel.PROLIFIC)
        .exclude(state=Worker.State.RETURNED)
        .count()
    )
    if taken >= study.prolific_places:
        raise EntryRefused("This study is full. Thank you for your interest.")


UNVERIFIED_EXCLUDE_REASON = "not a submission of the linked Prolific study (checked after entry)"


def unverified_recheck(*, study: Study) -> tuple[int, int]:
    """Ask Prolific about the workers let in unverified; return (verified, excluded).

    A worker whose SESSION_ID Prolific knows as a submission of the linked study for their
    PROLIFIC_PID (in whatever status by now) is marked verified; one Prolific does not know, or
    knows for another study or participant, is excluded from analysis and pay with a reason
    (services.workers.worker_exclude). Stops at the first failure to reach Prolific (they stay
    unverified for the next run); each look-up runs outside any transaction.
    """
    verified = excluded = 0
    try:
        client = prolific_client(study=study)
    except ProlificNotConnected:
        return 0, 0
    waiting = list(
        Worker.objects.filter(
            study=study, prolific_verification=Worker.Verification.UNVERIFIED, excluded=False
        )
    )
    for worker in waiting:
        try:
            submission = client.submission_get(worker.panel_session_id)
        except ProlificNotFound:
            submission = None
        except ProlificError as exc:
            logger.warning("Prolific re-check of study %s stopped: %s", study.pk, exc)
            break
        real = (
            submission is not None
            and submission.study_id == study.prolific_study_id
            and submission.participant_id == worker.external_id
        )
        if real:
            verified += Worker.objects.filter(
                pk=worker.pk, prolific_verification=Worker.Verification.UNVERIFIED
            ).update(prolific_verification=Worker.Verification.VERIFIED)
            continue
        # Stays marked unverified (and so keeps counting against the outage allowance).
        worker_exclude(worker=worker, reason=UNVERIFIED_EXCLUDE_REASON)
        excluded += 1
    return verified, excluded


def unverified_recheck_all() -> int:
    """Re-check every study that has workers let in unverified; return how many were checked."""
    studies = Study.objects.filter(
        workers__prolific_verification=Worker.Verification.UNVERIFIED, workers__excluded=False
    ).distinct()
    checked = 0
    for study in studies:
        verified, excluded = unverified_recheck(study=study)
        checked += verified + excluded
    return checked
