"""Celery tasks of the annotation app: thin doors that call one service."""

from __future__ import annotations

from celery import shared_task

from annotation.services.assignments import assignments_expire
from annotation.services.prolific import unverified_recheck_all
from annotation.services.prolific_bonus import bonus_batch_run, bonus_batches_run
from annotation.services.prolific_review import submissions_reconcile_all


# Runs on the default queue (no route needed); the beat schedule in the settings starts it.
@shared_task(name="annotation.assignments_expire", acks_late=True)
def assignments_expire_task() -> int:
    """Mark reservations past their time as expired (safe to run twice; run every minute)."""
    return assignments_expire()


@shared_task(name="annotation.prolific_unverified_recheck", acks_late=True)
def prolific_unverified_recheck_task() -> int:
    """Ask Prolific about participants let in unverified during an outage (safe to run twice)."""
    return unverified_recheck_all()


@shared_task(name="annotation.prolific_bonus_batch_run", acks_late=True)
def prolific_bonus_batch_run_task(batch_id: int) -> str:
    """Set up and pay one bonus batch on Prolific (pays at most once, however often it runs)."""
    return bonus_batch_run(batch_id=batch_id)


@shared_task(name="annotation.prolific_bonus_batches_run", acks_late=True)
def prolific_bonus_batches_run_task() -> int:
    """Take every bonus batch still on its way a step further (safe to run twice)."""
    return bonus_batches_run()


@shared_task(name="annotation.prolific_submissions_reconcile", acks_late=True)
def prolific_submissions_reconcile_task() -> int:
    """Read Prolific's submission statuses of every connected study (safe to run twice)."""
    return submissions_reconcile_all()
