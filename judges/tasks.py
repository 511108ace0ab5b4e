"""Celery tasks of the judges app: doors that load ids and call one service.

Each is made by core.tasks.task (a stable name, late acknowledgement, redelivery when its
worker dies, no stored result: the call rows are the record; time limits) and takes ids only.
Queues: LLM calls, fan-out, panel combination and reference writing on llm_judge, the
reconcilers of calls, PL runs and PL trainings on judge_reconcile, PL training, scoring and
contrast scoring on reward_model, connection tests on default. A dropped database connection
is the one error the call tasks retry here (the services retry their own writes first; what is
left is safe to run again).
"""

from __future__ import annotations

from typing import Any

from django.db import InterfaceError, OperationalError

from core.queues import Queue
from core.tasks import task
from judges.reward.contrast import contrast_scoring_run
from judges.reward.scoring import pl_run_execute
from judges.reward.scoring import pl_runs_reconcile as runs_reconcile
from judges.reward.services import pl_training_execute
from judges.reward.services import pl_trainings_reconcile as trainings_reconcile
from judges.services.calls import judge_call_execute, judge_calls_execute
from judges.services.connection import judge_connection_test_run
from judges.services.panels import panel_run_combine as panel_combine
from judges.services.reference_jobs import references_write_run
from judges.services.runs import judge_call_retry_send, judge_calls_reconcile, judge_run_fan_out

# A call waits at most a lease for its rate-limit slot, then runs at most a lease once claimed
# (CONCORD_JUDGE_LEASE_SECONDS, 180 s by default); its soft limit comes after both, so that by
# then the reconciler has taken the call back and this worker can write nothing more to it
# (judges.checks.judge_call_time_limit_above_lease checks it against the settings).
CALL_SOFT_TIME_LIMIT = 420
CALL_TIME_LIMIT = 480
# PL training and scoring are the long jobs: 26.5 s per 1,000 ranked lists and 40 epochs with
# cached embeddings, minutes per epoch with a cross-encoder on a CPU, and about 60 answers
# encoded per second (docs/reward-model.md, docs/benchmarks.md: 100,000 answers take half an
# hour). Two hours leaves room for a slow machine; a study beyond it trains on a GPU.
PL_SOFT_TIME_LIMIT = 7200
PL_TIME_LIMIT = 7500
DB_RETRY: dict[str, Any] = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
}


@task(
    name="judges.call_execute",
    queue=Queue.LLM_JUDGE,
    soft_time_limit=CALL_SOFT_TIME_LIMIT,
    time_limit=CALL_TIME_LIMIT,
    bind=True,
    max_retries=None,
    **DB_RETRY,
)
def call_execute(self: Any, call_id: int) -> str:
    """Make one judge call; retry later when the service says a transient error allows it.

    Limits 420 s soft, 480 s hard (CALL_SOFT_TIME_LIMIT): past the rate-limit wait and the
    lease, so a call stopped here is already the reconciler's, which queues it again and counts
    its request as possibly paid twice (docs/judges.md, "The reconciler").
    """
    outcome = judge_call_execute(call_id=call_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@task(
    name="judges.calls_execute",
    queue=Queue.LLM_JUDGE,
    soft_time_limit=CALL_SOFT_TIME_LIMIT,
    time_limit=CALL_TIME_LIMIT,
    max_retries=20,
    **DB_RETRY,
)
def calls_execute(call_ids: list[int]) -> int:
    """Make a batch of judge calls (one message of a run's fan-out); return how many were done.

    Limits as judges.call_execute's: the requests of a batch go out together, each within the
    lease. A call that is to be tried again later is sent again on its own (judges.call_execute).
    """
    outcomes = judge_calls_execute(call_ids=call_ids)
    for call_id, outcome in outcomes.items():
        if outcome.retry_in is not None:
            judge_call_retry_send(call_id=call_id, countdown=outcome.retry_in)
    return sum(1 for outcome in outcomes.values() if outcome.status == "done")


@task(
    name="judges.run_fan_out",
    queue=Queue.LLM_JUDGE,
    soft_time_limit=120,
    time_limit=150,
    max_retries=20,
    **DB_RETRY,
)
def run_fan_out(run_id: int, after_call_id: int) -> None:
    """Queue one chunk of a run's calls, then the next chunk as a task of its own.

    Limits 120 s soft, 150 s hard: one chunk is CONCORD_JUDGE_FAN_OUT_CHUNK (500) messages; a
    call left unqueued by a stopped chunk is pending, and the reconciler queues it after
    CONCORD_JUDGE_PENDING_GRACE_SECONDS.
    """
    last = judge_run_fan_out(run_id=run_id, after_call_id=after_call_id)
    if last is not None:
        run_fan_out.apply_async(args=[run_id, last])


@task(
    name="judges.panel_run_combine",
    queue=Queue.LLM_JUDGE,
    soft_time_limit=300,
    time_limit=360,
    max_retries=20,
    **DB_RETRY,
)
def panel_run_combine(run_id: int) -> int:
    """Write a panel run's calls from its members' runs (judges.services.panels).

    Limits 5 min soft, 6 min hard: 10,000 calls (5,000 pairs, 3 members, 2 orders) took 2.7 s.
    The calls and the done status are one transaction, so a stopped combination wrote nothing;
    the run stays running and the reconciler sends the task again after the grace period.
    """
    return panel_combine(run_id=run_id)


@task(name="judges.calls_reconcile", queue=Queue.JUDGE_RECONCILE, soft_time_limit=50, time_limit=58)
def calls_reconcile() -> int:
    """Queue again calls stuck past their lease or lost with their message (run by beat).

    Limits 50 s soft, 58 s hard: due again every CONCORD_JUDGE_RECONCILE_SECONDS (60) and safe
    to stop anywhere, each call being taken back by a conditional UPDATE of its own.
    """
    return judge_calls_reconcile()


@task(
    name="judges.pl_train",
    queue=Queue.REWARD_MODEL,
    soft_time_limit=PL_SOFT_TIME_LIMIT,
    time_limit=PL_TIME_LIMIT,
)
def pl_train(training_id: int) -> str:
    """Train one PL model (reward_model queue).

    Limits 2 h soft, 2 h 5 min hard (PL_SOFT_TIME_LIMIT): stopped, the training is recorded
    failed with the limit as its reason and its artifact folder removed; Retry trains again.
    """
    return pl_training_execute(training_id=training_id)


@task(
    name="judges.pl_score_run",
    queue=Queue.REWARD_MODEL,
    soft_time_limit=PL_SOFT_TIME_LIMIT,
    time_limit=PL_TIME_LIMIT,
)
def pl_score_run(run_id: int) -> str:
    """Score a PL judge's run: each answer once, then one call per pair (reward_model queue).

    Limits 2 h soft, 2 h 5 min hard (PL_SOFT_TIME_LIMIT): stopped, the run is recorded failed
    with the limit as its reason, and a new run scores again.
    """
    return pl_run_execute(run_id=run_id)


@task(
    name="judges.contrast_score",
    queue=Queue.REWARD_MODEL,
    soft_time_limit=PL_SOFT_TIME_LIMIT,
    time_limit=PL_TIME_LIMIT,
)
def contrast_score(run_id: int, contrast_set_id: int) -> str:
    """Score a contrast set with a done PL run's model and store it for the report
    (judges.reward.contrast; reward_model queue).

    Limits 2 h soft, 2 h 5 min hard (PL_SOFT_TIME_LIMIT): it embeds every answer the run scored
    under its question, a text the run's scoring did not embed, so it costs about what scoring
    the run did (100,000 answers: half an hour). Stopped, the scoring is recorded failed with
    the limit as its reason; the next request scores again. Its claim's lease
    (judges.reward.contrast.LEASE_SECONDS) outlasts the hard limit.
    """
    return contrast_scoring_run(run_id=run_id, contrast_set_id=contrast_set_id)


@task(
    name="judges.pl_trainings_reconcile",
    queue=Queue.JUDGE_RECONCILE,
    soft_time_limit=50,
    time_limit=58,
)
def pl_trainings_reconcile() -> int:
    """Mark failed the trainings whose worker stopped, and send again those whose message was
    lost (run by Celery beat, on the reconcilers' queue: on reward_model it would wait behind
    the training it checks, and count as a message waiting there).

    Limits 50 s soft, 58 s hard: one UPDATE and a conditional UPDATE per lost message, due
    again every minute.
    """
    return trainings_reconcile()


@task(
    name="judges.pl_runs_reconcile",
    queue=Queue.JUDGE_RECONCILE,
    soft_time_limit=50,
    time_limit=58,
)
def pl_runs_reconcile() -> int:
    """Queue again the PL runs, and the contrast scorings, whose worker stopped or whose message
    was lost (run by Celery beat).

    Limits 50 s soft, 58 s hard: due again every CONCORD_REWARD_RECONCILE_SECONDS (60), each run
    taken back by a conditional UPDATE of its own.
    """
    return runs_reconcile()


@task(name="judges.connection_test", queue=Queue.DEFAULT, soft_time_limit=45, time_limit=60)
def connection_test(judge_id: int) -> bool:
    """Make a judge's pending "Test connection" call and store its answer for the page.

    Limits 45 s soft, 60 s hard: one call of at most CONCORD_JUDGE_TEST_SECONDS (10). A stopped
    test stores no answer; the page reads it as lost once its pending mark runs out (the
    deadline plus 60 s), and a new click tests again.
    """
    return judge_connection_test_run(judge_id=judge_id)


@task(
    name="judges.references_write",
    queue=Queue.LLM_JUDGE,
    soft_time_limit=3300,
    time_limit=3420,
)
def references_write(study_id: int, judge_id: int) -> bool:
    """Write the study's pending missing references with the judge (judges.services.
    reference_jobs).

    Limits 55 min soft, 57 min hard (REFERENCES_*_TIME_LIMIT): one request at a time, each at
    most CONCORD_JUDGE_TIMEOUT_SECONDS (60) after its rate-limit wait, for the few dozen
    prompts of a study's reference categories (MT-Bench's 80). Every request is on the
    reference ledger as it goes, so a stopped job keeps what it wrote (its request in flight is
    recorded failed and possibly paid) and its outcome is shown; writing again asks the rest.
    """
    return references_write_run(study_id=study_id, judge_id=judge_id)
