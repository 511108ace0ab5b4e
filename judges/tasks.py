"""Celery tasks of the judges app: doors that load ids and call one service.

Every task has a stable explicit name, takes ids only, acknowledges late and is rejected (so
redelivered) when its worker dies. Results are not stored: the call rows are the record. They
are routed by CELERY_TASK_ROUTES in the settings: LLM calls and fan-out to the llm_judge queue,
the reconcilers of calls and of PL runs to judge_reconcile, PL training and scoring to the
reward_model queue. A dropped database connection is the one error the call tasks retry here
(the services retry their own writes first; what is left is safe to run again).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from judges.reward.scoring import pl_run_execute
from judges.reward.scoring import pl_runs_reconcile as runs_reconcile
from judges.reward.services import pl_training_execute
from judges.reward.services import pl_trainings_reconcile as trainings_reconcile
from judges.services.calls import judge_call_execute
from judges.services.connection import judge_connection_test_run
from judges.services.panels import panel_run_combine as panel_combine
from judges.services.runs import judge_calls_reconcile, judge_run_fan_out

TASK_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
}
DB_RETRY: dict[str, Any] = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
}


@shared_task(name="judges.call_execute", bind=True, max_retries=None, **TASK_OPTIONS, **DB_RETRY)
def call_execute(self: Any, call_id: int) -> str:
    """Make one judge call; retry later when the service says a transient error allows it."""
    outcome = judge_call_execute(call_id=call_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task(name="judges.run_fan_out", max_retries=20, **TASK_OPTIONS, **DB_RETRY)
def run_fan_out(run_id: int, after_call_id: int) -> None:
    """Queue one chunk of a run's calls, then the next chunk as a task of its own."""
    last = judge_run_fan_out(run_id=run_id, after_call_id=after_call_id)
    if last is not None:
        run_fan_out.apply_async(args=[run_id, last])


@shared_task(name="judges.panel_run_combine", max_retries=20, **TASK_OPTIONS, **DB_RETRY)
def panel_run_combine(run_id: int) -> int:
    """Write a panel run's calls from its members' runs (judges.services.panels)."""
    return panel_combine(run_id=run_id)


@shared_task(name="judges.calls_reconcile", **TASK_OPTIONS)
def calls_reconcile() -> int:
    """Queue again calls stuck past their lease or lost with their message (run by beat)."""
    return judge_calls_reconcile()


@shared_task(name="judges.pl_train", **TASK_OPTIONS)
def pl_train(training_id: int) -> str:
    """Train one PL model (reward_model queue)."""
    return pl_training_execute(training_id=training_id)


@shared_task(name="judges.pl_score_run", **TASK_OPTIONS)
def pl_score_run(run_id: int) -> str:
    """Score a PL judge's run: each answer once, then one call per pair (reward_model queue)."""
    return pl_run_execute(run_id=run_id)


@shared_task(name="judges.pl_trainings_reconcile", **TASK_OPTIONS)
def pl_trainings_reconcile() -> int:
    """Mark failed the trainings whose worker stopped (run by Celery beat)."""
    return trainings_reconcile()


@shared_task(name="judges.pl_runs_reconcile", **TASK_OPTIONS)
def pl_runs_reconcile() -> int:
    """Queue again the PL runs whose scoring worker stopped (run by Celery beat)."""
    return runs_reconcile()


@shared_task(name="judges.connection_test", **TASK_OPTIONS)
def connection_test(judge_id: int) -> bool:
    """Make a judge's pending "Test connection" call and store its answer for the page."""
    return judge_connection_test_run(judge_id=judge_id)
