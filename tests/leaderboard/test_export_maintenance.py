"""Export maintenance: lost jobs are queued again (a real worker then builds them), jobs that keep
dying are given up with the reason, old files are deleted and their jobs expire."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Study
from config.celery import app as celery_app
from leaderboard.models import ExportJob
from leaderboard.services import export_jobs
from leaderboard.services.export_jobs import export_job_build, export_jobs_maintain
from tests.conftest import Cast
from tests.judges.integration import broker_purge, wait_for, worker_start
from tests.leaderboard.conftest import run_import


def job_of(study: Study, cast: Cast, **fields: object) -> ExportJob:
    job = ExportJob.objects.create(
        study=study, requested_by=cast.researcher, kind="pairs", format="csv"
    )
    ExportJob.objects.filter(pk=job.pk).update(**fields)
    job.refresh_from_db()
    return job


def test_a_job_that_keeps_dying_is_given_up_with_the_reason(
    export_study: Study, cast: Cast, settings
) -> None:
    long_ago = timezone.now() - timedelta(hours=2)
    dying = job_of(export_study, cast, status="running", started_at=long_ago, attempts=3)
    fresh = job_of(export_study, cast, status="running", started_at=timezone.now(), attempts=3)

    outcome = export_jobs_maintain()

    dying.refresh_from_db()
    fresh.refresh_from_db()
    assert (outcome.gave_up, outcome.requeued) == (1, 0)
    assert dying.status == "failed" and "gave up after 3 builds" in dying.error
    assert fresh.status == "running"


def test_old_files_are_deleted_and_their_jobs_expire_while_recent_ones_stay(
    export_study: Study, cast: Cast, client: Client
) -> None:
    old = ExportJob.objects.create(study=export_study, kind="pairs", format="csv")
    new = ExportJob.objects.create(study=export_study, kind="pairs", format="jsonl")
    for job in (old, new):
        assert export_job_build(job_id=job.pk).built
    ExportJob.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=8))
    old.refresh_from_db()
    old_file = export_jobs.exports_dir() / old.file_name

    outcome = export_jobs_maintain()

    old.refresh_from_db()
    new.refresh_from_db()
    assert outcome.expired == 1
    assert (old.status, old.file_name) == ("expired", "") and not old_file.exists()
    assert new.status == "done" and (export_jobs.exports_dir() / new.file_name).is_file()
    client.force_login(cast.researcher)
    download = reverse("leaderboard:export_job_download", args=["mt-bench", old.public_id])
    assert client.get(download).status_code == 404
    page = reverse("leaderboard:study_export_jobs", args=["mt-bench"])
    assert "file deleted; ask again" in client.get(page).content.decode()


def test_partial_files_left_by_dead_workers_are_removed_once_stale(export_study: Study) -> None:
    folder = export_jobs.exports_dir()
    folder.mkdir(parents=True)
    stale, live = folder / ".a.1.partial", folder / ".b.2.partial"
    for path in (stale, live):
        path.write_bytes(b"half a file")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))

    assert export_jobs_maintain().partials_removed == 1
    assert not stale.exists() and live.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_message_was_lost_is_queued_again_and_built_by_a_worker(
    cast: Cast, files: dict[str, Path], settings, tmp_path: Path
) -> None:
    var = tmp_path / "var"
    settings.CONCORD_VAR_DIR = var
    run_import(files)
    study = Study.objects.get(slug="mt-bench")
    # Pending for an hour and nothing on the broker: its message was lost.
    broker_purge(settings.CELERY_BROKER_URL, "export")
    lost = ExportJob.objects.create(study=study, kind="judgments", format="csv")
    ExportJob.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(hours=1))
    recent = ExportJob.objects.create(study=study, kind="pairs", format="csv")

    outcome = export_jobs_maintain()

    assert outcome.requeued == 1
    worker = worker_start(tmp_path, "exporter", queues="export", env={"CONCORD_VAR_DIR": str(var)})
    try:
        wait_for(
            lambda: ExportJob.objects.get(pk=lost.pk).status == "done",
            40,
            lambda: f"job {ExportJob.objects.get(pk=lost.pk).status}\n{worker.text()[-3000:]}",
        )
    finally:
        worker.stop()
    lost.refresh_from_db()
    assert (lost.rows, lost.attempts) == (4, 1)
    # The recent pending job was not queued by the pass (its own message may still come).
    assert ExportJob.objects.get(pk=recent.pk).status == "pending"


def test_beat_runs_the_maintenance_task_on_the_export_queue(export_study: Study, settings) -> None:
    from leaderboard.tasks import exports_maintain

    entry = settings.CELERY_BEAT_SCHEDULE["leaderboard-exports-maintain"]
    assert entry["task"] == exports_maintain.name == "leaderboard.exports_maintain"
    assert celery_app.amqp.router.route({}, exports_maintain.name)["queue"].name == "export"
    assert exports_maintain() == ("0 queued again, 0 given up, 0 expired, 0 partial files removed")
