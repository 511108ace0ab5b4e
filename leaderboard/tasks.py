"""Celery tasks of the leaderboard app: doors that load ids and call one service.

Each is made by core.tasks.task (a stable name, late acknowledgement, no stored result, time
limits) and takes ids only; reports run on the analysis queue, exports on the export queue, and
the services send them there explicitly.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init

from core.broker import worker_consumes
from core.queues import Queue
from core.tasks import task
from leaderboard.report.document import report_libraries_load
from leaderboard.services.export_jobs import export_job_build, export_jobs_maintain
from leaderboard.services.priority import pair_priorities_recompute, pair_priorities_refresh
from leaderboard.services.reports import report_snapshot_compute


@task(name="leaderboard.export_build", queue=Queue.EXPORT, soft_time_limit=1200, time_limit=1380)
def export_build(job_id: int) -> str:
    """Build one export job's file (a finished job is left as it is).

    Limits 20 min soft, 23 min hard: 300,000 rows take 1-5 s (docs/benchmarks.md), so the
    limit only stops a build gone wrong; stopped, the job is recorded failed with the limit as
    its reason and its partial file removed. The hard limit stays below
    CONCORD_EXPORT_STALE_MINUTES (30), after which exports_maintain queues a running job again.
    """
    return export_job_build(job_id=job_id).status


@task(name="leaderboard.exports_maintain", queue=Queue.EXPORT, soft_time_limit=240, time_limit=270)
def exports_maintain() -> str:
    """Queue lost export jobs again and delete expired export files (run by Celery beat).

    Limits 240 s soft, 270 s hard: due again every 300 s; each job and file is handled on its
    own, so a stopped run leaves the rest to the next.
    """
    outcome = export_jobs_maintain()
    return (
        f"{outcome.requeued} queued again, {outcome.gave_up} given up, "
        f"{outcome.expired} expired, {outcome.partials_removed} partial files removed"
    )


@task(name="leaderboard.report_compute", queue=Queue.ANALYSIS, soft_time_limit=900, time_limit=1080)
def report_compute(snapshot_id: int) -> str:
    """Compute one report snapshot (one worker per snapshot at a time).

    Limits 15 min soft, 18 min hard: the full report at 1M judgments and 2M calls takes 8-10 s
    (docs/benchmarks.md), MT-Bench with its bootstrap rounds well under a minute. Stopped, the
    snapshot records the limit as its error (the page shows it) and is free to compute again;
    the hard limit stays below STALE_COMPUTE (30 min), after which another worker may claim it.
    """
    return report_snapshot_compute(snapshot_id=snapshot_id)


@task(
    name="leaderboard.pair_priorities_recompute",
    queue=Queue.ANALYSIS,
    soft_time_limit=900,
    time_limit=1080,
)
def pair_priorities_recompute_task(study_id: int) -> str:
    """Recompute one study's pair priorities for active selection (safe to run twice).

    Limits 15 min soft, 18 min hard, as a report: it reads the study's calls and votes and
    bootstraps a Bradley-Terry fit. Stopped, nothing is stored and the old priorities stay.
    """
    done = pair_priorities_recompute(study_id=study_id)
    return f"{done.pairs} pairs, {done.pool} open, priority total {done.total:.3f}"


@task(
    name="leaderboard.pair_priorities_refresh",
    queue=Queue.ANALYSIS,
    soft_time_limit=240,
    time_limit=270,
)
def pair_priorities_refresh_task() -> str:
    """Recompute the pair priorities of every live active study (run by Celery beat).

    Limits 240 s soft, 270 s hard: due again every 300 s (its beat entry expires then); each
    study is stored on its own, so a stopped run keeps those done and stops at the limit.
    """
    return f"{pair_priorities_refresh()} studies"


@worker_process_init.connect
def report_libraries_warm(**_: Any) -> None:
    """Each process of a worker that serves the analysis queue loads the compiled Elo kernel and
    the analysis libraries as it starts, so that its first report pays for neither
    (report_libraries_load; the kernel's part is measured in benchmarks/bench_elo.py
    --fresh-process). Workers of the other queues (judge calls, exports, the reward model, the
    default queue) do not hold them for nothing: a task there loads what it uses when it runs."""
    if worker_consumes(Queue.ANALYSIS):
        report_libraries_load()


@task(
    name="leaderboard.contrast_set_build",
    queue=Queue.DEFAULT,
    soft_time_limit=1200,
    time_limit=1260,
)
def contrast_set_build_task(study_id: int) -> bool:
    """Build the study's pending contrast set (leaderboard.services.contrast_jobs).

    Limits 1200 s soft, 1260 s hard (CONTRAST_*_TIME_LIMIT): a build from the shell took 129 s,
    mostly embedding; the store is one transaction, so a stopped build stored nothing and its
    failure is shown. Imported here, not at the top: the encoder is heavy for other workers.
    """
    from leaderboard.services.contrast_jobs import contrast_build_run

    return contrast_build_run(study_id=study_id)
