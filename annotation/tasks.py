"""Celery tasks of the annotation app: thin doors that call one service."""

from __future__ import annotations

from annotation.services.assignments import assignments_expire
from annotation.services.pairs_jobs import (
    PAIRS_SOFT_TIME_LIMIT,
    PAIRS_TIME_LIMIT,
    pairs_generation_run,
)
from annotation.services.prolific import prolific_connection_test_run, unverified_recheck_all
from annotation.services.prolific_bonus import bonus_batch_run, bonus_batches_run
from annotation.services.prolific_review import submissions_reconcile_all
from core.queues import Queue
from core.tasks import task


# Beat starts these on the default queue (CELERY_BEAT_SCHEDULE in the settings).
@task(name="annotation.assignments_expire", queue=Queue.DEFAULT, soft_time_limit=50, time_limit=60)
def assignments_expire_task() -> int:
    """Mark reservations past their time as expired (safe to run twice; run every minute).

    Limits 50 s soft, 60 s hard: one UPDATE, due again a minute later; a stopped run changed
    nothing or everything it touched (one statement), and the next run does the rest.
    """
    return assignments_expire()


@task(
    name="annotation.prolific_unverified_recheck",
    queue=Queue.DEFAULT,
    soft_time_limit=240,
    time_limit=270,
)
def prolific_unverified_recheck_task() -> int:
    """Ask Prolific about participants let in unverified during an outage (safe to run twice).

    Limits 240 s soft, 270 s hard: API requests with their own deadlines, study by study, due
    again every 300 s (its beat entry expires then); each study's outcome is written as it
    comes, so a stopped run leaves the rest for the next one.
    """
    return unverified_recheck_all()


@task(
    name="annotation.prolific_bonus_batch_run",
    queue=Queue.DEFAULT,
    soft_time_limit=120,
    time_limit=150,
)
def prolific_bonus_batch_run_task(batch_id: int) -> str:
    """Set up and pay one bonus batch on Prolific (pays at most once, however often it runs).

    Limits 120 s soft, 150 s hard: two API requests with their own deadlines. Stopped while
    paying, the batch is recorded uncertain with the reason (it may have been paid); stopped
    while setting up, it goes back to pending (nothing is paid).
    """
    return bonus_batch_run(batch_id=batch_id)


@task(
    name="annotation.prolific_bonus_batches_run",
    queue=Queue.DEFAULT,
    soft_time_limit=50,
    time_limit=58,
)
def prolific_bonus_batches_run_task() -> int:
    """Take every bonus batch still on its way a step further (safe to run twice).

    Limits 50 s soft, 58 s hard: due again every minute (its beat entry expires then); each
    batch is handled as in prolific_bonus_batch_run, and the next run takes the rest.
    """
    return bonus_batches_run()


@task(
    name="annotation.prolific_submissions_reconcile",
    queue=Queue.DEFAULT,
    soft_time_limit=240,
    time_limit=270,
)
def prolific_submissions_reconcile_task() -> int:
    """Read Prolific's submission statuses of every connected study (safe to run twice).

    Limits 240 s soft, 270 s hard: API reads study by study, due again every 300 s (its beat
    entry expires then); each study's statuses are written as they come, so the next run
    catches up.
    """
    return submissions_reconcile_all()


@task(
    name="annotation.prolific_connection_test",
    queue=Queue.DEFAULT,
    soft_time_limit=45,
    time_limit=60,
)
def prolific_connection_test_task(study_id: int) -> bool:
    """Make a study's pending Prolific "Test connection" and store its answer for the page.

    Limits 45 s soft, 60 s hard: one read of the Prolific study (PROLIFIC_API_TIMEOUT_SECONDS
    per phase). A stopped test stores no answer; the panel reads it as lost once its pending
    mark runs out, and a new click tests again.
    """
    return prolific_connection_test_run(study_id=study_id)


@task(
    name="annotation.pairs_generate",
    queue=Queue.DEFAULT,
    soft_time_limit=PAIRS_SOFT_TIME_LIMIT,
    time_limit=PAIRS_TIME_LIMIT,
)
def pairs_generate_task(study_id: int) -> bool:
    """Make the study's pending pair generation (annotation.services.pairs_jobs).

    Limits 1200 s soft, 1260 s hard: an "all pairs" run of 130,500 pairs took two minutes; the
    generation is one transaction, so a stopped run made no pairs and its failure is shown.
    """
    return pairs_generation_run(study_id=study_id)
