"""How a worker comes in: rate limit, participant to user and worker, one live session each."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from annotation.models import Study, Worker
from annotation.panels import Panel, Participant
from annotation.roles import Role
from annotation.services.errors import EntryRateLimited, EntryRefused, StudyNotOpen

# A session counts as in use while it was seen within this many seconds (or the study's time
# limit, when longer): a worker who lost their browser can come back after that.
SESSION_IDLE_SECONDS = 300


def entry_attempt_register(*, client_key: str) -> None:
    """Count one entry attempt from a client; refuse past the limit per minute.

    Uses Django's cache (Redis in production), a fixed one-minute window per client.
    """
    limit: int = getattr(settings, "CONCORD_ENTRY_ATTEMPTS_PER_MINUTE", 30)
    window = int(timezone.now().timestamp() // 60)
    key = "concord:entry:" + hashlib.sha256(f"{client_key}:{window}".encode()).hexdigest()
    cache.add(key, 0, timeout=120)
    try:
        attempts = cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, timeout=120)
        attempts = 1
    if attempts > limit:
        raise EntryRateLimited("Too many attempts to enter. Please wait a minute and try again.")


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
    *, study: Study, panel: Panel, participant: Participant, session_key: str | None
) -> Worker:
    """Find or create the worker (and their user) for a participant arriving from a panel.

    Locks the worker row. Refuses while another browser session holds this participant (and, for
    single-use invites, whenever another session ever held it). The caller logs the user in and
    then binds the new session with `worker_session_bind`.
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
        defaults={"user": user, "panel_session_id": participant.panel_session_id},
    )
    worker = (
        Worker.objects.select_for_update()
        .select_related("study")
        .get(study=study, panel=panel.key, external_id=participant.external_id)
    )
    if worker.user_id != user.pk:
        raise EntryRefused("This participant id is already in use.")
    elsewhere = bool(worker.session_key) and worker.session_key != (session_key or "")
    if elsewhere and (panel.single_use or _session_in_use(worker=worker, now=now)):
        if panel.single_use:
            raise EntryRefused("This invite link was already used in another browser.")
        raise EntryRefused(
            "You are already working on this study in another window or device. Please continue "
            "there, or close it and try again in a few minutes."
        )
    if participant.panel_session_id and participant.panel_session_id != worker.panel_session_id:
        worker.panel_session_id = participant.panel_session_id
        worker.save(update_fields=["panel_session_id"])
    return worker


def worker_session_bind(*, worker: Worker, session_key: str) -> None:
    """Bind the worker to the browser session that just logged in; other sessions are out."""
    Worker.objects.filter(pk=worker.pk).update(session_key=session_key, last_seen_at=timezone.now())
    worker.session_key = session_key


def worker_seen(*, worker: Worker) -> None:
    """Note that the worker's bound session is in use now."""
    Worker.objects.filter(pk=worker.pk).update(last_seen_at=timezone.now())
