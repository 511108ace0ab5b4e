"""A PL run's scoring lease, its heartbeat and the reconciler that re-queues a lost worker's run.

Real PostgreSQL and the real Redis broker: the reconciler's message is read back from the
reward_model queue as a worker would pop it. No model is trained: the lease is the run row's.
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
from judges.models import Judge, JudgeRun
from judges.reward.scoring import (
    TASK_SCORE_RUN,
    pl_run_claim,
    pl_run_execute,
    pl_run_heartbeat,
    pl_runs_reconcile,
)
from judges.selectors.runs import judge_run_progress
from judges.services.runs import judge_run_cancel, judge_run_resume
from tests.conftest import PASSWORD, Cast
from tests.judges.conftest import make_marked_pairs
from tests.judges.reward.conftest import at_once, queued

pytestmark = pytest.mark.django_db


def pl_run(cast: Cast, name: str = "pl-lease") -> JudgeRun:
    judge = Judge.objects.create(
        name=name,
        kind=Judge.Kind.PL,
        params={"artifact": "pl-missing"},
        order_policy=Judge.OrderPolicy.FIXED,
        order_invariant=True,
    )
    return JudgeRun.objects.create(
        judge=judge, study=cast.study, status=JudgeRun.Status.PENDING, created_by=cast.researcher
    )


def lease_runs_out(run: JudgeRun) -> None:
    """What a killed worker leaves behind: its lease passes with no heartbeat."""
    past = timezone.now() - timedelta(seconds=1)
    JudgeRun.objects.filter(pk=run.pk).update(
        score_lease_expires_at=past, score_heartbeat_at=past - timedelta(seconds=120)
    )


def test_a_run_whose_lease_ran_out_is_queued_again_once(cast: Cast, broker: str) -> None:
    run = pl_run(cast)
    token = pl_run_claim(run_id=run.pk)
    assert token is not None
    lease_runs_out(run)
    assert pl_runs_reconcile() == 1
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.PENDING
    assert (run.score_lease_token, run.score_lease_expires_at) == ("", None)
    assert run.score_requeued_at is not None and run.score_attempts == 1
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]
    # Once: the next round finds nothing to take back and sends nothing.
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []
    # The lost worker's token holds the run no more: its heartbeat and writes stop.
    assert not pl_run_heartbeat(run_id=run.pk, token=token)
    # The re-sent message's worker claims it, as the second attempt.
    assert pl_run_claim(run_id=run.pk) is not None
    run.refresh_from_db()
    assert run.score_attempts == 2 and run.score_lease_token not in ("", token)


def test_a_live_lease_is_left_alone_and_its_heartbeat_renews_it(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    settings.CONCORD_REWARD_SCORE_LEASE_SECONDS = 30
    run = pl_run(cast)
    token = pl_run_claim(run_id=run.pk)
    assert token is not None
    # A second copy of the message finds the lease live and takes nothing.
    assert pl_run_claim(run_id=run.pk) is None
    run.refresh_from_db()
    before = run.score_lease_expires_at
    assert before is not None and before > timezone.now() + timedelta(seconds=25)
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []
    assert pl_run_heartbeat(run_id=run.pk, token=token)
    run.refresh_from_db()
    assert run.score_lease_token == token and run.score_attempts == 1
    assert run.score_lease_expires_at is not None and run.score_lease_expires_at >= before
    assert run.score_requeued_at is None
    state = judge_run_progress(run=run).scoring
    assert state.startswith("Scoring, last heartbeat 0 s ago (0 answers scored so far; attempt 1")


def test_a_run_whose_worker_is_lost_on_the_last_attempt_fails_and_says_why(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    settings.CONCORD_REWARD_SCORE_MAX_ATTEMPTS = 2
    run = pl_run(cast)
    for _ in range(2):
        assert pl_run_claim(run_id=run.pk) is not None
        lease_runs_out(run)
        assert pl_runs_reconcile() == 1
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.FAILED and run.finished_at is not None
    assert run.note.startswith("scoring failed: the worker scoring it was lost 2 times")
    assert "answers scored so far are kept" in run.note
    # Queued again after the first loss only; the failed run is claimed by nobody.
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]
    assert pl_run_claim(run_id=run.pk) is None
    assert pl_run_execute(run_id=run.pk) == "skipped"
    assert judge_run_progress(run=run).scoring.startswith(
        "Failed: the worker scoring it was lost 2 times (its lease of 120 s ran out; last "
        "heartbeat "
    )


def test_the_claim_is_refused_after_the_last_attempt_even_before_the_reconciler_runs(
    cast: Cast, settings: LazySettings
) -> None:
    settings.CONCORD_REWARD_SCORE_MAX_ATTEMPTS = 1
    run = pl_run(cast)
    assert pl_run_claim(run_id=run.pk) is not None
    lease_runs_out(run)
    # A redelivered message may claim a run whose lease ran out, but not past the last attempt.
    assert pl_run_claim(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.score_attempts == 1


def test_a_resumed_run_is_claimed_afresh(cast: Cast, broker: str) -> None:
    run = pl_run(cast)
    assert pl_run_claim(run_id=run.pk) is not None
    judge_run_cancel(run=run, user=cast.researcher)
    assert pl_runs_reconcile() == 0
    JudgeRun.objects.filter(pk=run.pk).update(score_attempts=3)
    # The cancelled run's artifact is missing, so resume through the scoring service itself.
    from judges.reward.scoring import pl_run_resume

    with pytest.raises(Exception, match="not ready"):
        judge_run_resume(run=run, user=cast.researcher)
    pl_run_resume(run=run)
    run.refresh_from_db()
    assert (run.status, run.score_attempts, run.score_lease_token) == ("pending", 0, "")
    assert pl_run_claim(run_id=run.pk) is not None


def test_the_run_page_shows_the_scoring_lost_worker_and_failure(
    cast: Cast, broker: str, client: Client, settings: LazySettings
) -> None:
    settings.CONCORD_REWARD_SCORE_MAX_ATTEMPTS = 2
    run = pl_run(cast)
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    progress = reverse("judges:run_progress", args=[cast.study.slug, run.pk])
    assert re.search(
        r"Queued \d+ s ago, waiting for a worker on the reward_model queue", client.get(page).text
    )
    pl_run_claim(run_id=run.pk)
    assert "Scoring, last heartbeat 0 s ago" in client.get(page).text
    assert client.get(progress).json()["scoring"].startswith("Scoring, last heartbeat 0 s ago")
    lease_runs_out(run)
    assert "Worker lost? No heartbeat for 121 s" in client.get(page).text
    pl_runs_reconcile()
    run.refresh_from_db()
    assert run.score_requeued_at is not None
    at = timezone.localtime(run.score_requeued_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    text = client.get(page).text
    assert f"Worker lost, re-queued at {at} UTC (0 answers scored so far are kept" in text
    pl_run_claim(run_id=run.pk)
    lease_runs_out(run)
    pl_runs_reconcile()
    assert "Failed: the worker scoring it was lost 2 times" in client.get(page).text
    assert client.get(progress).json()["scoring"].startswith("Failed: the worker scoring it")


def test_beat_sends_the_reconciler_to_the_reconciler_queue() -> None:
    from django.conf import settings

    entries = [
        e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "judges.pl_runs_reconcile"
    ]
    assert len(entries) == 1
    assert entries[0]["schedule"] == settings.CONCORD_REWARD_RECONCILE_SECONDS
    import judges.tasks  # noqa: F401 - registers the tasks, whose queues the router reads

    assert "judges.pl_runs_reconcile" in celery_app.tasks
    route = celery_app.amqp.router.route({}, "judges.pl_runs_reconcile")
    assert route["queue"].name == "judge_reconcile"


def message_lost(run: JudgeRun, settings: LazySettings) -> None:
    """What a lost message leaves behind: a run no worker claimed past the grace period."""
    past = timezone.now() - timedelta(
        seconds=settings.CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS + 1
    )
    JudgeRun.objects.filter(pk=run.pk).update(score_queued_at=past)


def test_a_run_whose_message_was_lost_is_sent_again_once_and_scored_once(
    cast: Cast, broker: str, client: Client, settings: LazySettings
) -> None:
    run = pl_run(cast)
    # Within the grace period its message may still be on its way: nothing is sent.
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []
    # A run from before the send time was kept counts from its creation.
    JudgeRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert pl_runs_reconcile() == 1
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.PENDING and run.score_resends == 1
    assert run.score_resent_at is not None and run.score_queued_at == run.score_resent_at
    assert (run.score_attempts, run.score_lease_token) == (0, "")
    # Once: the next round is within the new grace period.
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    at = timezone.localtime(run.score_resent_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert re.search(
        re.escape(f"Message lost? Re-sent at {at} UTC (")
        + r"\d+ s ago\): no worker had claimed the scoring 600 s after it was queued "
        + re.escape("(re-sent once; 0 of 3 attempts used); waiting for a worker"),
        client.get(page).text,
    )
    # Lost again: re-sent a second time, and the page counts it.
    message_lost(run, settings)
    assert pl_runs_reconcile() == 1
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]
    assert "(re-sent 2 times; 0 of 3 attempts used)" in client.get(page).text
    # The re-sent message's worker claims the run; the first message, arriving late after all,
    # finds the lease live and scores nothing: one attempt.
    assert pl_run_claim(run_id=run.pk) is not None
    assert pl_run_execute(run_id=run.pk) == "skipped"
    run.refresh_from_db()
    assert run.score_attempts == 1
    # A claimed run is never sent again, however long ago it was queued.
    message_lost(run, settings)
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []


def test_a_run_a_worker_claimed_meanwhile_is_not_sent_again(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    from judges.reward.scoring import pl_run_resend_take

    run = pl_run(cast)
    message_lost(run, settings)
    now = timezone.now()
    before = now - timedelta(seconds=settings.CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS)
    # The reconciler read the run as unclaimed; a worker claims it before the re-send is taken.
    assert pl_run_claim(run_id=run.pk) is not None
    assert not pl_run_resend_take(run_id=run.pk, before=before, now=now)
    run.refresh_from_db()
    assert (run.score_resends, run.score_resent_at) == (0, None)
    # Taken once: a second reconciler with the same view takes nothing.
    other = pl_run(cast, name="pl-other")
    message_lost(other, settings)
    assert pl_run_resend_take(run_id=other.pk, before=before, now=now)
    assert not pl_run_resend_take(run_id=other.pk, before=before, now=now)


def test_nothing_is_sent_again_while_a_message_waits_in_the_reward_model_queue(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    from core.broker import task_send
    from core.queues import Queue

    run = pl_run(cast)
    message_lost(run, settings)
    # Behind a long training its own message may still be in line.
    task_send("judges.pl_train", args=[0], queue=Queue.REWARD_MODEL)
    assert pl_runs_reconcile() == 0
    run.refresh_from_db()
    assert run.score_resends == 0
    assert queued(broker) == [("judges.pl_train", [0])]
    assert pl_runs_reconcile() == 1
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]


def test_a_re_send_the_broker_refused_is_tried_again_at_the_next_round(
    cast: Cast, broker: str, settings: LazySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.broker import BrokerUnavailable
    from judges.reward import resend

    run = pl_run(cast)
    message_lost(run, settings)
    before = JudgeRun.objects.get(pk=run.pk).score_queued_at

    def refuse(*args: object, **kwargs: object) -> None:
        raise BrokerUnavailable("the broker refused")

    monkeypatch.setattr(resend, "task_send", refuse)
    assert pl_runs_reconcile() == 0
    run.refresh_from_db()
    assert (run.score_queued_at, run.score_resent_at, run.score_resends) == (before, None, 0)
    monkeypatch.undo()
    assert pl_runs_reconcile() == 1
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]


@pytest.mark.django_db(transaction=True)
def test_four_reconcilers_at_once_send_a_lost_message_once(
    cast: Cast, broker: str, settings: LazySettings
) -> None:
    run = pl_run(cast)
    message_lost(run, settings)
    assert at_once(pl_runs_reconcile) == [0, 0, 0, 1]
    assert queued(broker) == [(TASK_SCORE_RUN, [run.pk])]
    assert JudgeRun.objects.get(pk=run.pk).score_resends == 1


def test_a_started_or_resumed_run_counts_its_grace_from_that_send(cast: Cast) -> None:
    from judges.reward.scoring import pl_run_resume
    from judges.services.runs import judge_run_create

    make_marked_pairs(cast.study, 1)
    judge = Judge.objects.create(name="pl-sent", kind=Judge.Kind.PL, params={"artifact": "x"})
    run = judge_run_create(judge=judge, study=cast.study, user=cast.researcher)
    assert run.score_queued_at is not None
    old = timezone.now() - timedelta(hours=2)
    JudgeRun.objects.filter(pk=run.pk).update(
        status=JudgeRun.Status.CANCELLED, score_queued_at=old, score_resent_at=old, score_resends=2
    )
    run.refresh_from_db()
    resumed = pl_run_resume(run=run)
    assert resumed.score_queued_at is not None and resumed.score_queued_at > old
    assert (resumed.score_resent_at, resumed.score_resends) == (None, 0)


@pytest.mark.django_db(transaction=True)
def test_two_copies_of_the_message_at_once_give_one_claim(cast: Cast) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    for round_ in range(5):
        run = pl_run(cast, name=f"pl-copies-{round_}")
        start = threading.Barrier(4)

        def one(run_id: int = run.pk, barrier: threading.Barrier = start) -> str | None:
            try:
                barrier.wait()
                return pl_run_claim(run_id=run_id)
            finally:
                connection.close()

        with ThreadPoolExecutor(max_workers=4) as pool:
            tokens = [t for t in pool.map(lambda _: one(), range(4)) if t is not None]
        run.refresh_from_db()
        assert len(tokens) == 1, f"round {round_}: {len(tokens)} claims"
        assert (run.score_attempts, run.score_lease_token) == (1, tokens[0])
