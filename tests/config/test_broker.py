"""The broker helpers every app queues through (core/broker.py), against a real Redis and a
port where nothing listens."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.broker import BrokerUnavailable, broker_check, queue_length, task_send
from core.queues import Queue
from leaderboard.models import ExportJob
from leaderboard.services.export_jobs import export_job_request
from tests.conftest import Cast
from tests.judges.integration import broker_purge, broker_url_set

DEAD = "redis://reader:s3cret@127.0.0.1:1/0"


def test_a_refused_task_names_itself_the_broker_without_its_password_and_the_recovery() -> None:
    with broker_url_set(DEAD), pytest.raises(BrokerUnavailable) as caught:
        task_send("judges.call_execute", args=[1], queue=Queue.LLM_JUDGE, recovery="it waits.")
    message = str(caught.value)
    assert message.startswith(
        "could not queue judges.call_execute: the Celery broker at redis://127.0.0.1:1/0 "
        "does not answer ("
    )
    assert message.endswith("; it waits.") and "s3cret" not in message


def test_the_check_and_the_queue_length_see_a_live_broker_and_a_dead_one(settings: Any) -> None:
    broker_purge(settings.CELERY_BROKER_URL, Queue.ANALYSIS.value)
    broker_check()
    task_send("leaderboard.nothing", args=[0], queue=Queue.ANALYSIS)
    task_send("leaderboard.nothing", args=[1], queue=Queue.ANALYSIS)
    assert queue_length(Queue.ANALYSIS) == 2
    broker_purge(settings.CELERY_BROKER_URL, Queue.ANALYSIS.value)
    with broker_url_set(DEAD):
        with pytest.raises(BrokerUnavailable, match="redis://127.0.0.1:1/0 does not answer"):
            broker_check()
        assert queue_length(Queue.ANALYSIS) == 0  # unreadable counts as empty, and logs


def test_an_export_the_broker_refuses_after_commit_is_marked_failed_with_the_reason(
    cast: Cast, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = export_job_request(study=cast.study, user=cast.researcher, kind="pairs", fmt="csv")
    with broker_url_set(DEAD), pytest.raises(BrokerUnavailable, match="try again later"):
        for callback in callbacks:
            callback()
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED
    assert job.error.startswith("could not queue leaderboard.") and "s3cret" not in job.error
