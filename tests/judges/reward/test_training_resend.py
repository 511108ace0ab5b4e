"""A queued PL training whose message was lost is sent again once, and its page says so.

Real PostgreSQL and the real Redis broker: the reconciler's message is read back from the
reward_model queue as a worker would pop it. No model is trained: a claim is the row's UPDATE.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest
from django.conf import LazySettings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from config.celery import app as celery_app
from judges.models import PLTraining
from judges.reward.services import (
    TASK_TRAIN,
    pl_training_execute,
    pl_training_resend_take,
    pl_training_retry,
    pl_trainings_reconcile,
)
from tests.conftest import PASSWORD, Cast
from tests.judges.reward.conftest import at_once, queued

pytestmark = pytest.mark.django_db


def training(cast: Cast, name: str = "pl-queued") -> PLTraining:
    return PLTraining.objects.create(
        study=cast.study, name=name, epochs=1, created_by=cast.researcher, queued_at=timezone.now()
    )


def message_lost(row: PLTraining, settings: LazySettings) -> None:
    """What a lost message leaves behind: a training no worker claimed past the grace period."""
    past = timezone.now() - timedelta(
        seconds=settings.CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS + 1
    )
    PLTraining.objects.filter(pk=row.pk).update(queued_at=past)


def claim(row: PLTraining) -> None:
    """What pl_training_execute's claim writes (without training a model)."""
    PLTraining.objects.filter(pk=row.pk, status=PLTraining.Status.PENDING).update(
        status=PLTraining.Status.RUNNING, attempts=1, heartbeat_at=timezone.now()
    )


def test_a_training_whose_message_was_lost_is_sent_again_once_and_its_page_says_so(
    cast: Cast, broker: str, client: Client, settings: LazySettings
) -> None:
    row = training(cast)
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = reverse("judges:pl_training_detail", args=[cast.study.slug, row.pk])
    status = reverse("judges:pl_training_status", args=[cast.study.slug, row.pk])
    # Within the grace period its message may still be on its way: nothing is sent.
    assert pl_trainings_reconcile() == 0
    assert queued(broker) == []
    assert re.search(
        r"Queued \d+ s ago, waiting for a worker on the reward_model queue", client.get(page).text
    )
    # A training from before the send time was kept counts from its creation.
    PLTraining.objects.filter(pk=row.pk).update(
        queued_at=None, created_at=timezone.now() - timedelta(hours=1)
    )
    assert "CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS), so the reconciler sends it again" in (
        client.get(page).text
    )
    assert pl_trainings_reconcile() == 1
    assert queued(broker) == [(TASK_TRAIN, [row.pk])]
    row.refresh_from_db()
    assert row.status == PLTraining.Status.PENDING and row.resends == 1
    assert row.resent_at is not None and row.queued_at == row.resent_at
    # Once: the next round is within the new grace period.
    assert pl_trainings_reconcile() == 0
    assert queued(broker) == []
    at = timezone.localtime(row.resent_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    said = re.escape(f"Message lost? Re-sent at {at} UTC (") + (
        r"\d+ s ago\): no worker had claimed the training 600 s after it was queued "
        + re.escape("(re-sent once); waiting for a worker on the reward_model queue")
    )
    assert re.search(said, client.get(page).text)
    assert re.search(said, client.get(status).json()["queue"])
    # Lost again: re-sent a second time, and the page counts it.
    message_lost(row, settings)
    assert pl_trainings_reconcile() == 1
    assert queued(broker) == [(TASK_TRAIN, [row.pk])]
    assert "(re-sent 2 times)" in client.get(page).text
    # The re-sent message's worker claims it; the first message, arriving late after all,
    # finds it running and trains nothing: one attempt.
    claim(row)
    assert pl_training_execute(training_id=row.pk) == "skipped"
    row.refresh_from_db()
    assert row.attempts == 1
    assert "Message lost?" not in client.get(page).text
    # A claimed training is never sent again, however long ago it was queued.
    message_lost(row, settings)
    assert pl_trainings_reconcile() == 0
    assert queued(broker) == []


def test_a_training_a_worker_claimed_meanwhile_is_not_sent_again(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    row = training(cast)
    message_lost(row, settings)
    now = timezone.now()
    before = now - timedelta(seconds=settings.CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS)
    # The reconciler read it as pending; a worker claims it before the re-send is taken.
    claim(row)
    assert not pl_training_resend_take(training_id=row.pk, before=before, now=now)
    row.refresh_from_db()
    assert (row.resends, row.resent_at) == (0, None)
    # Taken once: a second reconciler with the same view takes nothing.
    other = training(cast, name="pl-other")
    message_lost(other, settings)
    assert pl_training_resend_take(training_id=other.pk, before=before, now=now)
    assert not pl_training_resend_take(training_id=other.pk, before=before, now=now)


def test_nothing_is_sent_again_while_a_message_waits_in_the_reward_model_queue(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    from core.broker import task_send
    from core.queues import Queue

    row = training(cast)
    message_lost(row, settings)
    # Behind a long scoring its own message may still be in line.
    task_send("judges.pl_score_run", args=[0], queue=Queue.REWARD_MODEL)
    assert pl_trainings_reconcile() == 0
    assert PLTraining.objects.get(pk=row.pk).resends == 0
    assert queued(broker) == [("judges.pl_score_run", [0])]
    assert pl_trainings_reconcile() == 1
    assert queued(broker) == [(TASK_TRAIN, [row.pk])]


def test_a_retried_training_counts_its_grace_from_the_retry(cast: Cast, broker: str) -> None:
    old = timezone.now() - timedelta(hours=1)
    row = training(cast)
    PLTraining.objects.filter(pk=row.pk).update(
        status=PLTraining.Status.FAILED, queued_at=old, resent_at=old, resends=2
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("judges.reward.services.broker_check", lambda: None)
        retried = pl_training_retry(training=row, user=cast.researcher)
    assert retried.queued_at is not None and retried.queued_at > old
    assert (retried.resent_at, retried.resends) == (None, 0)
    assert pl_trainings_reconcile() == 0


@pytest.mark.django_db(transaction=True)
def test_four_reconcilers_at_once_send_a_lost_training_message_once(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    row = training(cast)
    message_lost(row, settings)
    assert at_once(pl_trainings_reconcile) == [0, 0, 0, 1]
    assert queued(broker) == [(TASK_TRAIN, [row.pk])]
    assert PLTraining.objects.get(pk=row.pk).resends == 1


def test_beat_sends_the_trainings_reconciler_to_the_reconciler_queue() -> None:
    from django.conf import settings

    entries = [
        e
        for e in settings.CELERY_BEAT_SCHEDULE.values()
        if e["task"] == "judges.pl_trainings_reconcile"
    ]
    assert len(entries) == 1
    import judges.tasks  # noqa: F401 - registers the tasks, whose queues the router reads

    route = celery_app.amqp.router.route({}, "judges.pl_trainings_reconcile")
    assert route["queue"].name == "judge_reconcile"
