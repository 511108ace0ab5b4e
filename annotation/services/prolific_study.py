"""The Prolific study itself, from Concord: create it as a draft, publish, pause, resume, stop.

Creating a study on Prolific is not idempotent (every POST makes another draft), and a click
retried after a timeout must not make two. So the intent is recorded on the study before the
call (`prolific_draft_key`, kept until the draft is linked), the draft is named by it
(`internal_name`, which participants never see), and every attempt first looks for a study of
that name among the token's studies and links it instead of creating another. A lease
(`prolific_draft_lease_until`) keeps a second click from calling while the first is under way;
after a timeout it is kept for a while longer, so a draft Prolific is still making is found by
the next look-up rather than made again.

Transitions (POST /api/v1/studies/{id}/transition/) are offered only from the statuses Prolific
allows them in; Prolific's answer is stored as the study's Prolific status. No call is made
inside a database transaction, and no message or log line holds the token.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import Study
from annotation.prolific import ProlificError, ProlificStudy, ProlificUnavailable
from annotation.selectors.bonus import study_reward_cents
from annotation.selectors.checklist import study_pay_plan
from annotation.services.prolific import prolific_client

logger = logging.getLogger(__name__)

# Prolific's study statuses (Retrieve a study: `status`).
UNPUBLISHED = "UNPUBLISHED"
ACTIVE = "ACTIVE"
PAUSED = "PAUSED"
AWAITING_REVIEW = "AWAITING REVIEW"
COMPLETED = "COMPLETED"

# The transitions Prolific allows from each status, and the words the panel uses for them.
# SCHEDULED and PUBLISHING are on their way to ACTIVE; AWAITING REVIEW and COMPLETED are stopped.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    UNPUBLISHED: ("PUBLISH",),
    ACTIVE: ("PAUSE", "STOP"),
    PAUSED: ("START", "STOP"),
}
TRANSITION_LABELS: dict[str, str] = {
    "PUBLISH": "Publish on Prolific",
    "PAUSE": "Pause on Prolific",
    "START": "Resume on Prolific",
    "STOP": "Stop on Prolific",
}
# Publishing or resuming sends participants to Concord's entry link, which admits nobody unless
# the Concord study is live.
NEEDS_LIVE = frozenset({"PUBLISH", "START"})

# Prolific's completion-code actions and the code types Concord gives its three codes.
AUTOMATICALLY_APPROVE = "AUTOMATICALLY_APPROVE"
MANUALLY_REVIEW = "MANUALLY_REVIEW"


def draft_lease_seconds() -> float:
    """How long a create attempt holds the study: a look-up and a create, with room to spare."""
    return 2 * float(settings.PROLIFIC_API_TIMEOUT_SECONDS) + 10


@dataclass(frozen=True)
class DraftOutcome:
    study: ProlificStudy
    created: bool  # False: a draft of an earlier attempt was found and linked


def prolific_internal_name(*, study: Study, key: str) -> str:
    """The draft's internal name on Prolific (researchers see it, participants do not)."""
    return f"concord:{study.slug}:{key}"


def prolific_completion_codes(*, study: Study) -> list[dict[str, Any]]:
    """Concord's codes as Prolific's `completion_codes`: the full code approves automatically
    or waits for review as the study says; the partial and screened-out codes wait for review."""
    full = AUTOMATICALLY_APPROVE if study.prolific_auto_approve else MANUALLY_REVIEW
    codes = [
        {"code": study.completion_code, "code_type": "COMPLETED", "actions": [{"action": full}]}
    ]
    if study.partial_completion_code:
        codes.append(
            {
                "code": study.partial_completion_code,
                "code_type": "OTHER",
                "actions": [{"action": MANUALLY_REVIEW}],
            }
        )
    if study.screened_out_code:
        codes.append(
            {
                "code": study.screened_out_code,
                "code_type": "FAILED_ATTENTION_CHECK",
                "actions": [{"action": MANUALLY_REVIEW}],
            }
        )
    return codes


def prolific_draft_payload(
    *, study: Study, key: str, entry_url: str, name: str, description: str, places: int
) -> dict[str, Any]:
    """The body of POST /api/v1/studies/ for this study (docs.prolific.com, Create a study).

    The reward is the study's Prolific reward (or the session pay), in cents; the estimated
    time is the launch checklist's minutes (target x expected seconds, rounded up).
    """
    return {
        "name": name,
        "internal_name": prolific_internal_name(study=study, key=key),
        "description": description,
        "external_study_url": entry_url,
        "prolific_id_option": "url_parameters",
        "completion_codes": prolific_completion_codes(study=study),
        "total_available_places": places,
        "estimated_completion_time": study_pay_plan(study=study).minutes,
        "reward": study_reward_cents(study=study),
    }


def _draft_problems(*, study: Study, name: str, description: str, places: int) -> list[str]:
    problems = []
    if not study.prolific_token_encrypted:
        problems.append("paste a Prolific API token first")
    if not study.completion_code:
        problems.append("set the completion code in Settings first (Prolific needs one)")
    if not name.strip():
        problems.append("give the study a title for participants")
    if not description.strip():
        problems.append("give the study a description for participants")
    if places < 1:
        problems.append("give at least one place")
    if study_reward_cents(study=study) < 1:
        problems.append("the reward is 0: set the pay per judgment or the Prolific reward")
    return problems


class ProlificDraftBusy(ProlificError):
    """Another attempt to create this study's draft holds the lease."""


def _draft_claim(*, study: Study) -> str:
    """Record the intent to create (its key) and take the lease; the key to name the draft.

    Locks the study row for the claim alone (select_for_update, committed before any call).
    Raises ProlificError when the study is already linked, ProlificDraftBusy while another
    attempt holds the lease.
    """
    now = timezone.now()
    with transaction.atomic():
        row = Study.objects.select_for_update().get(pk=study.pk)
        if row.prolific_study_id:
            raise ProlificError(
                f"This study is already linked to Prolific study {row.prolific_study_id}: "
                "no second draft is made."
            )
        if row.prolific_draft_lease_until and row.prolific_draft_lease_until > now:
            wait = int((row.prolific_draft_lease_until - now).total_seconds()) + 1
            raise ProlificDraftBusy(
                f"A draft is being created on Prolific for this study (or its last attempt "
                f"timed out). Try again in {wait} seconds: Concord then looks for that draft "
                "before it creates one."
            )
        key = row.prolific_draft_key or uuid.uuid4().hex[:12]
        Study.objects.filter(pk=study.pk).update(
            prolific_draft_key=key,
            prolific_draft_lease_until=now + timedelta(seconds=draft_lease_seconds()),
        )
    study.prolific_draft_key = key
    return key


def _lease_set(*, study: Study, until: Any) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_draft_lease_until=until)
    study.prolific_draft_lease_until = until


def prolific_draft_create(
    *,
    study: Study,
    entry_url_for: Callable[[Study], str],
    name: str,
    description: str,
    places: int,
) -> DraftOutcome:
    """Create the study on Prolific as a draft, at most once, and link it.

    `entry_url_for(study)` gives the entry link for the study as it stands (a signed link
    depends on the Prolific study id, so it is asked again once the id is known and the
    draft's URL is updated). Raises ProlificError with a message for the researcher: a
    refusal from Prolific (status and Prolific's words), a timeout (the lease is kept a while,
    then a retry looks for the draft first), or a study already linked.
    """
    problems = _draft_problems(study=study, name=name, description=description, places=places)
    if problems:
        raise ProlificError("Not created: " + "; ".join(problems) + ".")
    client = prolific_client(study=study)  # an unreadable token fails before the claim
    key = _draft_claim(study=study)
    internal_name = prolific_internal_name(study=study, key=key)
    payload = prolific_draft_payload(
        study=study,
        key=key,
        entry_url=entry_url_for(study),
        name=name.strip(),
        description=description.strip(),
        places=places,
    )
    try:
        found = next((s for s in client.studies_list() if s.internal_name == internal_name), None)
        created = found is None
        if found is None:
            found = client.study_create(payload)
    except ProlificUnavailable:
        # Prolific may have made the draft all the same: keep the lease for one more round, so
        # the next attempt comes after it and finds the draft by its name.
        _lease_set(study=study, until=timezone.now() + timedelta(seconds=draft_lease_seconds()))
        raise
    except ProlificError:
        _lease_set(study=study, until=None)  # refused: nothing was made
        raise
    with transaction.atomic():
        linked = Study.objects.filter(pk=study.pk, prolific_study_id="").update(
            prolific_study_id=found.id,
            prolific_study_status=found.status or UNPUBLISHED,
            prolific_places=found.places or places,
            prolific_reward_cents=payload["reward"],
            prolific_draft_lease_until=None,
        )
    if not linked:
        raise ProlificError("This study was linked to another Prolific study meanwhile.")
    study.refresh_from_db()
    logger.info(
        "Study %s: Prolific draft %s %s", study.pk, found.id, "created" if created else "found"
    )
    _study_url_sync(study=study, entry_url_for=entry_url_for, best_effort=True)
    return DraftOutcome(study=found, created=created)


def _study_url_sync(
    *, study: Study, entry_url_for: Callable[[Study], str], best_effort: bool
) -> None:
    """Give Prolific the signed entry link for the linked id (PATCH, idempotent).

    Only studies that require a signed link need it: the signature covers the Prolific study
    id, which the draft did not have when its URL was sent.
    """
    if not study.entry_link_required:
        return
    try:
        prolific_client(study=study).study_update(
            study.prolific_study_id, {"external_study_url": entry_url_for(study)}
        )
    except ProlificError:
        if not best_effort:
            raise
        logger.warning("Study %s: the Prolific draft's study URL is not updated yet", study.pk)


def prolific_transitions(*, study: Study) -> tuple[str, ...]:
    """The transitions the panel offers: those Prolific allows from its last known status."""
    if not study.prolific_study_id or not study.prolific_token_encrypted:
        return ()
    return TRANSITIONS.get(study.prolific_study_status, ())


def prolific_study_transition(
    *, study: Study, action: str, entry_url_for: Callable[[Study], str]
) -> ProlificStudy:
    """Publish, pause, resume (START) or stop the linked Prolific study; store its new status.

    Refused without a call when the action is not allowed from the status Concord last read,
    or (publish, resume) while the Concord study is not live. When Prolific refuses (its study
    changed on Prolific's own site meanwhile), its status is read again so the panel offers
    what is possible now, and the refusal is raised with Prolific's words.
    """
    allowed = prolific_transitions(study=study)
    if action not in TRANSITION_LABELS:
        raise ProlificError(f"Unknown transition {action!r}.")
    if action not in allowed:
        status = study.prolific_study_status or "unknown"
        raise ProlificError(
            f"Prolific's study is {status}: {TRANSITION_LABELS[action].lower()} is not possible "
            "from there."
        )
    if action in NEEDS_LIVE and study.status != Study.Status.LIVE:
        raise ProlificError(
            "Launch the study in Concord first (its launch checklist): until it is live, "
            "Concord turns away every participant Prolific sends."
        )
    if action == "PUBLISH":
        _study_url_sync(study=study, entry_url_for=entry_url_for, best_effort=False)
    client = prolific_client(study=study)
    try:
        moved = client.study_transition(study.prolific_study_id, action=action)
    except ProlificError:
        try:
            now = client.study_get(study.prolific_study_id)
        except ProlificError:
            pass
        else:
            _status_store(study=study, status=now.status)
        raise
    # Prolific answers with the study; a reply without a status is read again.
    status = moved.status or client.study_get(study.prolific_study_id).status
    _status_store(study=study, status=status)
    logger.info("Study %s: Prolific %s -> %s", study.pk, action, status)
    return moved


def _status_store(*, study: Study, status: str) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_study_status=status)
    study.prolific_study_status = status
