"""Background exports: a study's rows or report written to a file by a Celery worker.

A researcher asks for an export (`export_job_request`); a job row is created and the task
`leaderboard.export_build` is queued after commit on the export queue (its own, so that it
never waits behind report recomputes). The worker calls
`export_job_build`, which claims the job with a conditional UPDATE (pending or running ->
running), writes the file in chunks to a temporary name, renames it into place and marks the
job done (running -> done). A redelivered task finds the job done or failed and does nothing; a
task redelivered after its worker died finds it running and builds it again from the start,
over the same temporary name.
"""

from __future__ import annotations

import io
import json
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.models import Study
from core import csvsafe
from core.broker import BrokerUnavailable, broker_check, task_send
from core.queues import Queue
from core.tasks import failure_reason
from leaderboard.models import ExportJob
from leaderboard.selectors.exports import EXPORT_TABLES, study_export_count
from leaderboard.services.exports import parquet_stream, study_export_write
from leaderboard.services.reports import agreement_report_snapshot, report_flatten

TASK_EXPORT_BUILD = "leaderboard.export_build"
# Rows written as one Parquet row group.
EXPORT_CHUNK_ROWS = 50_000


def exports_dir() -> Path:
    """Where export files live: settings.CONCORD_VAR_DIR / "exports"."""
    return Path(settings.CONCORD_VAR_DIR) / "exports"


def export_sync_max_rows() -> int:
    """Tables with more rows than this are exported in the background only."""
    return int(settings.CONCORD_EXPORT_SYNC_MAX_ROWS)


def export_needs_job(*, study: Study, kind: str) -> bool:
    """Whether a download of this table is too big to build inside a web request."""
    if kind not in EXPORT_TABLES:
        return False
    return study_export_count(study=study, table=kind) > export_sync_max_rows()


def _enqueue(job_id: int) -> None:
    try:
        task_send(TASK_EXPORT_BUILD, args=[job_id], queue=Queue.EXPORT)
    except BrokerUnavailable as exc:
        ExportJob.objects.filter(pk=job_id, status=ExportJob.Status.PENDING).update(
            status=ExportJob.Status.FAILED, error=str(exc), finished_at=timezone.now()
        )
        raise BrokerUnavailable(f"{exc}. Nothing was queued; try again later.") from exc


def export_job_request(*, study: Study, user: User, kind: str, fmt: str) -> ExportJob:
    """Create a pending export job and queue its build after commit.

    Raise ValidationError for an unknown kind or format, BrokerUnavailable when the broker does
    not answer (checked before anything is written; if publishing still fails after commit, the
    job is marked failed with that error). The caller checks that the user may read the study.
    """
    errors = {}
    if kind not in ExportJob.Kind.values:
        errors["kind"] = f"kind must be one of {sorted(ExportJob.Kind.values)}, not {kind!r}"
    if fmt not in ExportJob.Format.values:
        errors["format"] = f"format must be one of {sorted(ExportJob.Format.values)}, not {fmt!r}"
    if errors:
        raise ValidationError(errors)
    broker_check()
    with transaction.atomic():
        job = ExportJob.objects.create(study=study, requested_by=user, kind=kind, format=fmt)
        job_id = job.pk
        transaction.on_commit(lambda: _enqueue(job_id))
    return job


@dataclass(frozen=True)
class ExportOutcome:
    """What one build attempt did: `built` is False when the job was already finished."""

    status: str
    built: bool
    rows: int | None = None


def _claim(job_id: int) -> bool:
    """pending/running -> running, one more attempt; False when the job is finished or gone."""
    changed = ExportJob.objects.filter(
        pk=job_id, status__in=[ExportJob.Status.PENDING, ExportJob.Status.RUNNING]
    ).update(
        status=ExportJob.Status.RUNNING,
        started_at=timezone.now(),
        error="",
        attempts=F("attempts") + 1,
    )
    return changed == 1


def export_job_build(*, job_id: int) -> ExportOutcome:
    """Build the job's file; do nothing when the job is already done or failed.

    Takes no lock: the claim and the completion are conditional UPDATEs on the status. The file
    is written to a temporary name and renamed into place before the job is marked done, so a
    done job always has its whole file.
    """
    if not _claim(job_id):
        status = ExportJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        return ExportOutcome(status=str(status or "missing"), built=False)
    job = ExportJob.objects.select_related("study").get(pk=job_id)
    folder = exports_dir()
    name = f"{job.study.slug}-{job.kind}-{secrets.token_urlsafe(16)}.{job.format}"
    # A file of this attempt's own: a job queued again while a slow first build still runs
    # never has two writers on one file.
    partial = folder / f".{job.public_id}.{secrets.token_hex(8)}.partial"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            rows = _write(job, out)
        partial.replace(folder / name)
    except Exception as exc:
        if partial.parent.is_dir():
            partial.unlink(missing_ok=True)
        ExportJob.objects.filter(pk=job_id, status=ExportJob.Status.RUNNING).update(
            status=ExportJob.Status.FAILED,
            error=failure_reason(exc),
            finished_at=timezone.now(),
        )
        raise
    finished = ExportJob.objects.filter(pk=job_id, status=ExportJob.Status.RUNNING).update(
        status=ExportJob.Status.DONE, file_name=name, rows=rows, finished_at=timezone.now()
    )
    if not finished:
        # Another delivery finished it first; keep its file, drop ours.
        (folder / name).unlink(missing_ok=True)
        return ExportOutcome(status=ExportJob.Status.DONE, built=False)
    return ExportOutcome(status=ExportJob.Status.DONE, built=True, rows=rows)


def _write_report(job: ExportJob, out: IO[bytes]) -> int:
    """The report flattened to (path, JSON value) rows, in the job's format."""
    import pyarrow as pa

    schema = pa.schema([pa.field("path", pa.string()), pa.field("value", pa.string())])
    payload = agreement_report_snapshot(study=job.study).payload
    rows = [(path, json.dumps(value)) for path, value in report_flatten(payload)]
    if job.format == ExportJob.Format.PARQUET:
        table = pa.Table.from_pydict(
            {"path": [p for p, _ in rows], "value": [v for _, v in rows]}, schema=schema
        )
        for data in parquet_stream(table.to_batches(), schema, chunk_rows=EXPORT_CHUNK_ROWS):
            out.write(data)
        return len(rows)
    text = io.TextIOWrapper(out, encoding="utf-8", newline="")
    if job.format == ExportJob.Format.CSV:
        writer = csvsafe.writer(text, lineterminator="\n")
        writer.writerow(schema.names)
        writer.writerows(rows)
    else:
        for path, value in rows:
            text.write(json.dumps({"path": path, "value": value}, ensure_ascii=False) + "\n")
    text.flush()
    text.detach()
    return len(rows)


def _write(job: ExportJob, out: IO[bytes]) -> int:
    """Write the job's rows chunk by chunk; return how many rows were written."""
    if job.kind == ExportJob.Kind.REPORT:
        return _write_report(job, out)
    return study_export_write(
        study=job.study, table=job.kind, fmt=job.format, out=out, chunk_rows=EXPORT_CHUNK_ROWS
    )


def export_job_file(*, job: ExportJob) -> Path:
    """The finished job's file; FileNotFoundError when the job is not done or the file is gone."""
    if job.status != ExportJob.Status.DONE or not job.file_name:
        raise FileNotFoundError(f"export {job.public_id} is {job.status}, not done")
    path = exports_dir() / job.file_name
    if not path.is_file():
        raise FileNotFoundError(f"the file of export {job.public_id} is gone")
    return path


@dataclass(frozen=True)
class MaintainOutcome:
    """What one maintenance pass did."""

    requeued: int
    gave_up: int
    expired: int
    partials_removed: int


def export_jobs_maintain(*, now: datetime | None = None) -> MaintainOutcome:
    """Queue lost jobs again, give up on jobs that keep dying, delete expired export files.

    - A job pending since before ``now - CONCORD_EXPORT_STALE_MINUTES`` lost its message (a
      broker restart, say), a job running since before then lost its worker: each is queued
      again, unless it already started CONCORD_EXPORT_MAX_ATTEMPTS builds, then it is marked
      failed with the reason. A build that is merely slow and still running is harmless to queue
      again: each attempt writes its own file and the first to finish wins.
    - A done job finished before ``now - CONCORD_EXPORT_KEEP_DAYS`` has its file deleted and
      becomes expired.
    - Partial files older than the stale window (left by dead workers) are deleted.
    """
    now = now or timezone.now()
    stale = now - timedelta(minutes=float(settings.CONCORD_EXPORT_STALE_MINUTES))
    lost = ExportJob.objects.filter(
        Q(status=ExportJob.Status.PENDING, created_at__lt=stale)
        | Q(status=ExportJob.Status.RUNNING, started_at__lt=stale)
    )
    max_attempts = int(settings.CONCORD_EXPORT_MAX_ATTEMPTS)
    gave_up = lost.filter(attempts__gte=max_attempts).update(
        status=ExportJob.Status.FAILED,
        error=(
            f"gave up after {max_attempts} builds that did not finish "
            "(the worker stopped each time); ask for the export again"
        ),
        finished_at=now,
    )
    requeued = 0
    for job_id in lost.filter(attempts__lt=max_attempts).values_list("pk", flat=True):
        _enqueue(int(job_id))
        requeued += 1

    expired = 0
    keep = now - timedelta(days=float(settings.CONCORD_EXPORT_KEEP_DAYS))
    folder = exports_dir()
    old_jobs = ExportJob.objects.filter(status=ExportJob.Status.DONE, finished_at__lt=keep)
    for job_id, file_name in old_jobs.values_list("pk", "file_name"):
        if file_name:
            (folder / file_name).unlink(missing_ok=True)
        expired += ExportJob.objects.filter(pk=job_id, status=ExportJob.Status.DONE).update(
            status=ExportJob.Status.EXPIRED, file_name=""
        )

    partials_removed = 0
    if folder.is_dir():
        cutoff = time.time() - (now - stale).total_seconds()
        for path in folder.glob(".*.partial"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    partials_removed += 1
            except FileNotFoundError:
                continue
    return MaintainOutcome(
        requeued=requeued, gave_up=gave_up, expired=expired, partials_removed=partials_removed
    )
