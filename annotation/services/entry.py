"""How a worker comes in: entry limits, participant to user and worker, one live session each.

Every attempt that reaches a study is written to its entry log (`EntryLog`) with its outcome,
so a researcher can see fabricated or hijacked participants; the limits count successful
entries per study (sized for a launch) apart from refused ones per client address, so garbage
from one address never uses up the budget of real participants.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, User
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from annotation.models import EntryLog, Study, Worker
from annotation.panels import Panel, Participant
from annotation.roles import Role
from annotation.services.errors import EntryRateLimited, EntryRefused, StudyNotOpen
from annotation.services.prolific import entry_places_check, entry_verify
from core.clientaddr import client_address

# A session counts as in use while it was seen within this many seconds (or the study's time
# limit, when longer): a worker who lost their browser can come back after that.
SESSION_IDLE_SECONDS = 300
# How stale a worker's last_seen_at may get before a request writes it again.
LAST_SEEN_EVERY_SECONDS = 30


@dataclass(frozen=True)
class Client:
    """Who is knocking: a keyed hash of their address (for logs and limits) and their session."""

    key: str
    session_key: str | None


def client_make(*, meta: Mapping[str, str], session_key: str | None) -> Client:
    """Describe the requesting client; the address is kept only as a keyed hash."""
    digest = hmac.new(
        settings.SECRET_KEY.encode(), client_address(meta).encode(), hashlib.sha256
    ).hexdigest()
    return Client(key=digest[:32], session_key=session_key)


# Entry limits are per minute, counted in a sliding window: this minute's count plus the
# previous minute's, weighted by how much of it still lies within the last 60 seconds (the
# sliding-window counter approximation). A fixed window would let a burst that straddles the
# turn of a minute through at twice the limit.
WINDOW_SECONDS = 60


def _bucket_keys(name: str) -> tuple[str, str, float]:
    """This window's key, the previous window's key and the share of this window elapsed."""
    window, into = divmod(timezone.now().timestamp(), WINDOW_SECONDS)

    def key(index: float) -> str:
        return "concord:entry:" + hashlib.sha256(f"{name}:{int(index)}".encode()).hexdigest()

    return key(window), key(window - 1), into / WINDOW_SECONDS


def _bucket_estimate(*, current: int, previous_key: str, elapsed: float) -> float:
    return current + int(cache.get(previous_key, 0)) * (1.0 - elapsed)


def _bucket_add(name: str, *, limit: int) -> bool:
    """Count one event in the sliding one-minute window (Django's cache, Redis in production).

    Return False once the last minute holds more than `limit` events.
    """
    key, previous_key, elapsed = _bucket_keys(name)
    cache.add(key, 0, timeout=3 * WINDOW_SECONDS)
    try:
        count = cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, timeout=3 * WINDOW_SECONDS)
        count = 1
    return _bucket_estimate(current=count, previous_key=previous_key, elapsed=elapsed) <= limit


def _bucket_full(name: str, *, limit: int) -> bool:
    key, previous_key, elapsed = _bucket_keys(name)
    current = int(cache.get(key, 0))
    return _bucket_estimate(current=current, previous_key=previous_key, elapsed=elapsed) >= limit


def entry_link_signature(*, study: Study) -> str:
    """The `sig` parameter of a study's signed entry link (HMAC of study, Prolific id and key)."""
    message = f"{study.pk}:{study.prolific_study_id}:{study.entry_link_key}"
    return hmac.new(
        settings.SECRET_KEY.encode(), f"concord.entry:{message}".encode(), hashlib.sha256
    ).hexdigest()[:32]


def entry_user_conflict(*, user: AbstractBaseUser | AnonymousUser) -> str:
    """Why this signed-in user must not be replaced by a worker silently; empty when they may.

    Staff, admins and researchers keep their session: a cross-site link to an entry URL would
    otherwise sign them out and into a worker (login CSRF).
    """
    if not user.is_authenticated or not isinstance(user, User):
        return ""
    roles = set(user.groups.values_list("name", flat=True))
    if user.is_staff or user.is_superuser or roles - {Role.ANNOTATOR.value}:
        return (
            "You are signed in to Concord as a researcher or admin. Sign out first, then open "
            "the study link again (or use a private window)."
        )
    return ""


def _log(
    *,
    study: Study,
    panel: Panel,
    params: Mapping[str, str],
    client: Client,
    outcome: EntryLog.Outcome,
    reason: str = "",
    worker: Worker | None = None,
) -> None:
    EntryLog.objects.create(
        study=study,
        worker=worker,
        panel=panel.key,
        external_id=str(params.get("PROLIFIC_PID") or params.get("participant") or "")[:200],
        panel_session_id=str(params.get("SESSION_ID", ""))[:200],
        panel_study_id=str(params.get("STUDY_ID", ""))[:200],
        client_key=client.key,
        outcome=outcome,
        reason=reason[:300],
    )


def entry_admit(*, study: Study, panel: Panel, params: Mapping[str, str], client: Client) -> Worker:
    """Check one entry attempt and return the worker it admits, or raise with the reason.

    Order of the checks: the refused-attempts bucket of the client's address (past its limit,
    refusals are answered 429 and not logged, but a valid entry still goes through, so garbage
    cannot lock real participants out), the study's status, the link (panel parameters, Prolific
    STUDY_ID, signature), with a Prolific token the participant's submission on Prolific
    (services.prolific.entry_verify) and the study's places, the binding of the participant to
    one panel session, then the study's and the address's budgets of successful entries. Every
    refusal below the limit is logged.
    """
    refused_limit = settings.CONCORD_ENTRY_REFUSED_PER_ADDRESS_PER_MINUTE
    flooded = _bucket_full(f"refused:{client.key}", limit=refused_limit)
    try:
        if study.status != Study.Status.LIVE:
            raise StudyNotOpen("This study is not taking judgments at the moment.")
        participant = panel.participant(study=study, params=params)
        _signature_check(study=study, panel=panel, params=params)
        verification = Worker.Verification.NONE
        if panel.key == Worker.Panel.PROLIFIC:
            # Asks Prolific (at most once per new participant), before any worker row exists.
            verification = entry_verify(study=study, participant=participant)
            entry_places_check(study=study, participant=participant)
        worker = worker_enter(
            study=study,
            panel=panel,
            participant=participant,
            session_key=client.session_key,
            verification=verification,
        )
    except (EntryRefused, StudyNotOpen) as exc:
        over = not _bucket_add(f"refused:{client.key}", limit=refused_limit)
        if flooded or over:
            raise EntryRateLimited(
                "Too many attempts to enter. Please wait a minute and try again."
            ) from exc
        outcome = (
            EntryLog.Outcome.TAKEOVER_REFUSED
            if isinstance(exc, TakeoverRefused)
            else EntryLog.Outcome.REFUSED
        )
        _log(
            study=study,
            panel=panel,
            params=params,
            client=client,
            outcome=outcome,
            reason=exc.message,
        )
        raise
    per_address = settings.CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE
    if not _bucket_add(f"study:{study.pk}", limit=study.entry_attempts_per_minute) or not (
        _bucket_add(f"entered:{client.key}", limit=per_address)
    ):
        _log(
            study=study,
            panel=panel,
            params=params,
            client=client,
            outcome=EntryLog.Outcome.RATE_LIMITED,
            reason="Entry limit reached.",
            worker=worker,
        )
        raise EntryRateLimited(
            "Many people are joining right now. Please wait a minute and open the link again."
        )
    _log(
        study=study,
        panel=panel,
        params=params,
        client=client,
        outcome=EntryLog.Outcome.ENTERED,
        worker=worker,
    )
    return worker


def _signature_check(*, study: Study, panel: Panel, params: Mapping[str, str]) -> None:
    if not study.entry_link_required or panel.key == Worker.Panel.INVITE:
        return  # invites are signed tokens of their own
    given = str(params.get("sig", ""))
    if not hmac.compare_digest(given, entry_link_signature(study=study)):
        raise EntryRefused(
            "This link is not the study's link. Please open the study again from Prolific."
        )


class TakeoverRefused(EntryRefused):
    """The participant id is bound to another panel session (Prolific SESSION_ID)."""

    code = "session_mismatch"


def _username(*, study: Study, panel: Panel, participant: Participant) -> str:
    digest = hashlib.sha256(f"{study.pk}:{panel.key}:{participant.external_id}".encode())
    return f"{panel.key}-{digest.hexdigest()[:24]}"


def _session_in_use(*, worker: Worker, now: datetime) -> bool:
    if not worker.session_key or worker.last_seen_at is None:
        return False
    idle = max(SESSION_IDLE_SECONDS, worker.study.time_limit_seconds)
    return worker.last_seen_at > now - timedelta(seconds=idle)


@transaction.atomic
def worker_enter(
    *,
    study: Study,
    panel: Panel,
    participant: Participant,
    session_key: str | None,
    verification: Worker.Verification = Worker.Verification.NONE,
) -> Worker:
    """Find or create the worker (and their user) for a participant arriving from a panel.

    Locks the worker row. A participant is bound to the panel session id they first came with
    (Prolific's SESSION_ID, one per submission): another one is refused (`TakeoverRefused`),
    unless Prolific has just verified the new one and not the old one (`verification`): then the
    verified session takes the participant back from whoever entered with a made-up one.
    Refuses while another browser session holds this participant (and, for single-use invites,
    whenever another session ever held it). The caller logs the user in and then binds the new
    session with `worker_session_bind`.
    """
    if study.status != Study.Status.LIVE:
        raise StudyNotOpen("This study is not taking judgments at the moment.")
    now = timezone.now()
    user, _ = User.objects.get_or_create(
        username=_username(study=study, panel=panel, participant=participant)
    )
    if user.has_usable_password():
        user.set_unusable_password()
        user.save(update_fields=["password"])
    user.groups.add(Group.objects.get(name=Role.ANNOTATOR))
    Worker.objects.get_or_create(
        study=study,
        panel=panel.key,
        external_id=participant.external_id,
        defaults={
            "user": user,
            "panel_session_id": participant.panel_session_id,
            "prolific_verification": verification,
        },
    )
    worker = (
        Worker.objects.select_for_update()
        .select_related("study")
        .get(study=study, panel=panel.key, external_id=participant.external_id)
    )
    if worker.user_id != user.pk:
        raise EntryRefused("This participant id is already in use.")
    verified = Worker.Verification.VERIFIED
    if (
        participant.panel_session_id
        and worker.panel_session_id
        and participant.panel_session_id != worker.panel_session_id
        and verification == verified
        and worker.prolific_verification != verified
    ):
        # The row was bound by an unverified entry with another SESSION_ID: Prolific says this
        # one is the participant's, so it takes the row and its browser session back.
        Worker.objects.filter(pk=worker.pk).update(
            panel_session_id=participant.panel_session_id,
            prolific_verification=verified,
            session_key="",
        )
        worker.panel_session_id = participant.panel_session_id
        worker.prolific_verification, worker.session_key = verified, ""
    if (
        participant.panel_session_id
        and worker.panel_session_id
        and participant.panel_session_id != worker.panel_session_id
    ):
        raise TakeoverRefused(
            "This participant id is already taking part in another session. Please open the "
            "study from your own Prolific account."
        )
    elsewhere = bool(worker.session_key) and worker.session_key != (session_key or "")
    if elsewhere and (panel.single_use or _session_in_use(worker=worker, now=now)):
        if panel.single_use:
            raise EntryRefused("This invite link was already used in another browser.")
        raise EntryRefused(
            "You are already working on this study in another window or device. Please continue "
            "there, or close it and try again in a few minutes."
        )
    if participant.panel_session_id and not worker.panel_session_id:
        worker.panel_session_id = participant.panel_session_id
        worker.save(update_fields=["panel_session_id"])
    if verification == verified and worker.prolific_verification != verified:
        Worker.objects.filter(pk=worker.pk).update(prolific_verification=verified)
        worker.prolific_verification = verified
    return worker


def worker_session_bind(*, worker: Worker, session_key: str) -> None:
    """Bind the worker to the browser session that just logged in; other sessions are out."""
    Worker.objects.filter(pk=worker.pk).update(session_key=session_key, last_seen_at=timezone.now())
    worker.session_key = session_key


def worker_seen(*, worker: Worker) -> None:
    """Note that the worker's bound session is in use now.

    Written at most every LAST_SEEN_EVERY_SECONDS (well inside SESSION_IDLE_SECONDS, which is
    all that reads it), so that most requests write nothing here.
    """
    now = timezone.now()
    if worker.last_seen_at is not None and now - worker.last_seen_at < timedelta(
        seconds=LAST_SEEN_EVERY_SECONDS
    ):
        return
    Worker.objects.filter(pk=worker.pk).update(last_seen_at=now)
    worker.last_seen_at = now
