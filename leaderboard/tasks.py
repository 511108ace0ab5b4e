"""Celery tasks of the leaderboard app: doors that load ids and call one service.

Stable explicit names, ids only, late acknowledgement, no result backend; routed to the
analysis queue by CELERY_TASK_ROUTES (and sent there explicitly by the service).
"""

from __future__ import annotations

from celery import shared_task

from leaderboard.services.export_jobs import export_job_build, export_jobs_maintain


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
