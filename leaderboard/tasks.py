"""Celery tasks of the leaderboard app: doors that load ids and call one service.

Stable explicit names, ids only, late acknowledgement, no result backend; routed to the
analysis queue (reports) or the export queue (exports) by CELERY_TASK_ROUTES, and sent there
explicitly by the services.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_process_init

from leaderboard.services.export_jobs import export_job_build, export_jobs_maintain
from leaderboard.services.priority import pair_priorities_recompute, pair_priorities_refresh
from leaderboard.services.reports import report_snapshot_compute
from leaderboard.stats.ratings import elo_kernel_warm


@shared_task(
    name="leaderboard.export_build", acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def export_build(job_id: int) -> str:
    """Build one export job's file (a finished job is left as it is)."""
    return export_job_build(job_id=job_id).status


@shared_task(name="leaderboard.exports_maintain", ignore_result=True)
def exports_maintain() -> str:
    """Queue lost export jobs again and delete expired export files (run by Celery beat)."""
    outcome = export_jobs_maintain()
    return (
        f"{outcome.requeued} queued again, {outcome.gave_up} given up, "
        f"{outcome.expired} expired, {outcome.partials_removed} partial files removed"
    )


@shared_task(
    name="leaderboard.report_compute",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def report_compute(snapshot_id: int) -> str:
    """Compute one report snapshot (one worker per snapshot at a time)."""
    return report_snapshot_compute(snapshot_id=snapshot_id)


@shared_task(
    name="leaderboard.pair_priorities_recompute",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def pair_priorities_recompute_task(study_id: int) -> str:
    """Recompute one study's pair priorities for active selection (safe to run twice)."""
    done = pair_priorities_recompute(study_id=study_id)
    return f"{done.pairs} pairs, {done.pool} open, priority total {done.total:.3f}"


@shared_task(name="leaderboard.pair_priorities_refresh", ignore_result=True)
def pair_priorities_refresh_task() -> str:
    """Recompute the pair priorities of every live active study (run by Celery beat)."""
    return f"{pair_priorities_refresh()} studies"


@worker_process_init.connect
def elo_kernel_load(**_: Any) -> None:
    """Each worker process loads the compiled Elo kernel as it starts, so that its first report
    does not pay for it (measured in benchmarks/bench_elo.py --fresh-process)."""
    elo_kernel_warm()
