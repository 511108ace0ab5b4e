"""A background export end to end: the page queues it on Redis, a real Celery worker on the
export queue builds it against this test's database, whatever waits on the analysis queue, and
the file downloads."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from annotation.services.roles import study_member_add
from core.broker import queue_length, task_send
from core.queues import Queue
from leaderboard.models import ExportJob
from leaderboard.services.reports import TASK_REPORT_COMPUTE
from tests.conftest import Cast
from tests.judges.integration import broker_purge, wait_for, worker_start
from tests.leaderboard.conftest import run_import

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_queued_export_goes_from_pending_to_done_and_downloads_every_row(
    cast: Cast, files: dict[str, Path], client: Client, settings, tmp_path: Path
) -> None:
    var = tmp_path / "var"
    settings.CONCORD_VAR_DIR = var
    broker_purge(settings.CELERY_BROKER_URL, "analysis")
    broker_purge(settings.CELERY_BROKER_URL, "export")
    run_import(files)
    study = Study.objects.get(slug="mt-bench")
    study_member_add(study=study, user=cast.researcher)
    client.force_login(cast.researcher)
    page = reverse("leaderboard:study_export_jobs", args=["mt-bench"])

    response = client.post(page, {"kind": "judgments", "format": "csv"})
    assert response.status_code == 302
    job = ExportJob.objects.get()
    # No worker yet: the job waits on the broker.
    assert (job.status, job.kind, job.format, job.requested_by) == (
        "pending",
        "judgments",
        "csv",
        cast.researcher,
    )
    assert "pending" in client.get(page).content.decode()
    # A backlog of report recomputes (issue 27: a 300k-row export waited 125 s behind them when
    # both shared the analysis queue): the export's worker never takes them first.
    for _ in range(20):
        task_send(TASK_REPORT_COMPUTE, args=[0], queue=Queue.ANALYSIS)
    assert queue_length(Queue.EXPORT) == 1

    worker = worker_start(tmp_path, "exporter", queues="export", env={"CONCORD_VAR_DIR": str(var)})
    try:
        wait_for(
            lambda: ExportJob.objects.get(pk=job.pk).status == "done",
            40,
            lambda: f"job {ExportJob.objects.get(pk=job.pk).status}\n{worker.text()[-3000:]}",
        )
    finally:
        worker.stop()
    assert "leaderboard.export_build[" in worker.text()  # received and run
    assert "leaderboard.report_compute[" not in worker.text()  # none received
    assert queue_length(Queue.ANALYSIS) == 20
    broker_purge(settings.CELERY_BROKER_URL, "analysis")

    job.refresh_from_db()
    assert job.rows == 4
    listing = client.get(page).content.decode()
    download = reverse("leaderboard:export_job_download", args=["mt-bench", job.public_id])
    assert download in listing
    response = client.get(download)
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    rows = list(csv.DictReader(io.StringIO(body)))
    assert sorted(r["rater"] for r in rows) == ["author_1", "expert_1", "expert_1", "expert_2"]
    assert {r["preference"] for r in rows} == {"A", "B", "tie"}
