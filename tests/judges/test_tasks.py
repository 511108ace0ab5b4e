"""Task options and the queueing of a run's calls, against the real Redis broker."""

from __future__ import annotations

import pytest
from django.conf import settings

from config.celery import app as celery_app
from core.broker import queue_length
from core.queues import Queue
from judges import tasks
from judges.models import JudgeCall
from judges.services.calls import judge_call_execute
from judges.services.runs import judge_run_fan_out, judge_run_start
from tests.judges.conftest import KEY_ENV, make_llm_judge, make_marked_pairs
from tests.judges.integration import broker_purge, judge_queue_messages

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("task", "name", "queue"),
    [
        (tasks.call_execute, "judges.call_execute", Queue.LLM_JUDGE),
        (tasks.calls_execute, "judges.calls_execute", Queue.LLM_JUDGE),
        (tasks.run_fan_out, "judges.run_fan_out", Queue.LLM_JUDGE),
        (tasks.panel_run_combine, "judges.panel_run_combine", Queue.LLM_JUDGE),
        (tasks.calls_reconcile, "judges.calls_reconcile", Queue.JUDGE_RECONCILE),
    ],
)
def test_judge_tasks_are_named_acknowledged_late_and_routed_to_their_queue(task, name, queue):
    assert task.name == name
    assert task.acks_late and task.reject_on_worker_lost and task.ignore_result
    assert celery_app.amqp.router.route({}, name)["queue"].name == queue


def test_beat_runs_the_reconciler_and_drops_copies_nobody_took_in_time():
    (entry,) = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == "judges.calls_reconcile"
    ]
    options: dict[str, float] = entry["options"]  # type: ignore[assignment]
    assert options["expires"] == entry["schedule"]


def test_the_fan_out_is_queued_only_when_the_run_is_committed(
    cast, fake, api_key, django_capture_on_commit_callbacks
):
    make_marked_pairs(cast.study, 1)
    broker_purge(settings.CELERY_BROKER_URL)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    assert len(callbacks) == 1
    assert queue_length(Queue.LLM_JUDGE) == 0
    callbacks[0]()
    assert queue_length(Queue.LLM_JUDGE) == 1
    broker_purge(settings.CELERY_BROKER_URL)


def test_a_big_run_is_queued_chunk_by_chunk_in_batches_of_calls(cast, fake, api_key, settings):
    settings.CONCORD_JUDGE_FAN_OUT_CHUNK = 4
    settings.CONCORD_JUDGE_CALL_BATCH = 3
    make_marked_pairs(cast.study, 3)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    ids = list(run.calls.order_by("pk").values_list("pk", flat=True))
    broker_purge(settings.CELERY_BROKER_URL)
    assert judge_run_fan_out(run_id=run.pk, after_call_id=0) == ids[3]
    assert judge_run_fan_out(run_id=run.pk, after_call_id=ids[3]) is None
    # Each chunk of 4 calls in messages of at most 3, every call once, in id order.
    messages = judge_queue_messages(settings.CELERY_BROKER_URL)
    assert messages == [
        ("judges.calls_execute", [ids[0:3]]),
        ("judges.calls_execute", [ids[3:4]]),
        ("judges.calls_execute", [ids[4:6]]),
    ]
    broker_purge(settings.CELERY_BROKER_URL)


def test_a_key_removed_mid_run_fails_the_call_without_sending_it(cast, fake, api_key, monkeypatch):
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    monkeypatch.delenv(KEY_ENV)
    call = run.calls.order_by("pk")[0]
    assert judge_call_execute(call_id=call.pk).status == "failed"
    call.refresh_from_db()
    assert call.status == JudgeCall.Status.FAILED
    assert call.error == f"not configured: set {KEY_ENV}"
    assert not fake.requests()
