"""Background exports: the build service, the jobs page, downloads and who may see them."""

from __future__ import annotations

import io
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from annotation.roles import Role
from config.celery import app as celery_app
from core.broker import BrokerUnavailable, queue_length
from core.queues import Queue
from leaderboard.models import ExportJob
from leaderboard.selectors.exports import study_export_count
from leaderboard.services import export_jobs, exports
from leaderboard.services.export_jobs import export_job_build, export_job_request
from leaderboard.services.exports import study_export
from tests.conftest import Cast, make_user
from tests.judges.integration import broker_purge


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rows per Parquet row group and 64 bytes per chunk, so that even the tiny study is
    written in several chunks."""
    monkeypatch.setattr(export_jobs, "EXPORT_CHUNK_ROWS", 2)
    monkeypatch.setattr(exports, "STREAM_CHUNK_BYTES", 64)


def built(study: Study, cast: Cast, kind: str, fmt: str) -> ExportJob:
    job = ExportJob.objects.create(study=study, requested_by=cast.researcher, kind=kind, format=fmt)
    outcome = export_job_build(job_id=job.pk)
    assert outcome.built and outcome.status == "done"
    job.refresh_from_db()
    return job


def job_bytes(job: ExportJob) -> bytes:
    return (export_jobs.exports_dir() / job.file_name).read_bytes()


@pytest.mark.parametrize("kind", ["pairs", "judgments", "calls"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_background_export_written_in_chunks_equals_the_direct_download(
    export_study: Study, cast: Cast, small_chunks: None, kind: str, fmt: str
) -> None:
    job = built(export_study, cast, kind, fmt)
    assert job.rows == study_export_count(study=export_study, table=kind) > 0
    assert job_bytes(job) == study_export(study=export_study, table=kind, fmt=fmt)
    assert job.finished_at is not None and job.started_at is not None


@pytest.mark.parametrize("kind", ["pairs", "judgments", "calls"])
def test_a_parquet_export_has_one_row_group_per_chunk_and_the_same_rows(
    export_study: Study, cast: Cast, small_chunks: None, kind: str
) -> None:
    job = built(export_study, cast, kind, "parquet")
    parquet = pq.ParquetFile(io.BytesIO(job_bytes(job)))
    lines = study_export(study=export_study, table=kind, fmt="jsonl").decode().splitlines()
    expected = [json.loads(line) for line in lines]
    assert parquet.metadata.num_row_groups == -(-len(expected) // 2)
    got = parquet.read().to_pylist()
    assert len(got) == len(expected) == job.rows
    for row, want in zip(got, expected, strict=True):
        assert list(row) == list(want)
        for column, value in row.items():
            if isinstance(value, datetime):
                # PostgreSQL writes the JSONL's times without trailing zeros in the fraction
                # (.59141, not .591410): compare the instants, not the spellings.
                assert value == datetime.fromisoformat(want[column]), column
                continue
            if isinstance(value, Decimal):
                value = float(value)
            elif isinstance(want[column], list | dict):
                value = json.loads(value)
            assert value == want[column], column


def test_the_report_export_lists_every_value_of_the_agreement_report(
    export_study: Study, cast: Cast
) -> None:
    job = built(export_study, cast, "report", "jsonl")
    lines = [json.loads(line) for line in job_bytes(job).decode().splitlines()]
    values = {line["path"]: json.loads(line["value"]) for line in lines}
    assert job.rows == len(lines)
    assert values["metadata.study.slug"] == "mt-bench"
    assert values["counts.human_votes"] >= 1


def test_a_redelivered_build_leaves_a_finished_job_and_its_file_alone(
    export_study: Study, cast: Cast
) -> None:
    job = built(export_study, cast, "judgments", "csv")
    again = export_job_build(job_id=job.pk)
    assert (again.built, again.status) == (False, "done")
    job_after = ExportJob.objects.get(pk=job.pk)
    assert (job_after.file_name, job_after.finished_at) == (job.file_name, job.finished_at)
    assert sorted(p.name for p in export_jobs.exports_dir().iterdir()) == [job.file_name]


def test_a_build_that_cannot_write_its_file_fails_with_the_reason(
    export_study: Study, cast: Cast, settings, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the exports folder should be")
    settings.CONCORD_VAR_DIR = blocker
    job = ExportJob.objects.create(study=export_study, kind="pairs", format="csv")
    with pytest.raises(OSError):
        export_job_build(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "not-a-folder" in job.error
    assert export_job_build(job_id=job.pk).built is False


def test_export_file_names_carry_a_random_token(export_study: Study, cast: Cast) -> None:
    first = built(export_study, cast, "pairs", "csv")
    second = built(export_study, cast, "pairs", "csv")
    assert first.file_name != second.file_name
    token = first.file_name.removeprefix("mt-bench-pairs-").removesuffix(".csv")
    assert len(token) >= 20


def test_asking_for_an_export_queues_it_after_commit(
    export_study: Study, cast: Cast, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        job = export_job_request(study=export_study, user=cast.researcher, kind="calls", fmt="csv")
    assert job.status == "pending" and len(callbacks) == 1


def test_an_export_goes_to_its_own_queue_not_behind_report_recomputes(
    export_study: Study, cast: Cast, django_capture_on_commit_callbacks, settings
) -> None:
    # Issue 27: a 300k-row export waited 125 s on the analysis queue behind report recomputes.
    broker_purge(settings.CELERY_BROKER_URL, "analysis", "export")
    with django_capture_on_commit_callbacks(execute=True):
        export_job_request(study=export_study, user=cast.researcher, kind="calls", fmt="csv")
    assert (queue_length(Queue.EXPORT), queue_length(Queue.ANALYSIS)) == (1, 0)
    broker_purge(settings.CELERY_BROKER_URL, "export")


def test_an_unknown_kind_or_format_is_refused_by_name(export_study: Study, cast: Cast) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        export_job_request(study=export_study, user=cast.researcher, kind="secrets", fmt="xlsx")
    assert "'secrets'" in str(caught.value) and "'xlsx'" in str(caught.value)
    assert not ExportJob.objects.exists()


def test_with_the_broker_down_asking_for_an_export_says_so_and_writes_nothing(
    export_study: Study, cast: Cast, client: Client, monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    # Celery reads CELERY_BROKER_URL from the environment before its configuration.
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    assert celery_app.conf.broker_url == "redis://127.0.0.1:1/0"
    with pytest.raises(BrokerUnavailable, match="redis://127.0.0.1:1/0 does not answer"):
        export_job_request(study=export_study, user=cast.researcher, kind="pairs", fmt="csv")
    client.force_login(cast.researcher)
    url = reverse("leaderboard:study_export_jobs", args=["mt-bench"])
    response = client.post(url, {"kind": "pairs", "format": "csv"})
    assert response.status_code == 503
    assert "does not answer" in response.content.decode()
    assert not ExportJob.objects.exists()


def test_a_big_table_download_leads_to_the_background_exports_page(
    export_study: Study, cast: Cast, client: Client, settings
) -> None:
    client.force_login(cast.researcher)
    settings.CONCORD_EXPORT_SYNC_MAX_ROWS = 3
    small = client.get(reverse("leaderboard:study_export", args=["mt-bench", "pairs", "csv"]))
    assert small.status_code == 200  # 3 pairs: still built in the request
    big = client.get(reverse("leaderboard:study_export", args=["mt-bench", "judgments", "csv"]))
    assert big.status_code == 302
    assert big["Location"] == (
        reverse("leaderboard:study_export_jobs", args=["mt-bench"]) + "?kind=judgments&format=csv"
    )
    page = client.get(big["Location"]).content.decode()
    assert '<option value="judgments" selected>' in page
    assert "more than 3 rows" in page
    assert not ExportJob.objects.exists()


def test_only_members_and_admins_see_the_jobs_and_download_the_files(
    export_study: Study, cast: Cast, client: Client
) -> None:
    done = built(export_study, cast, "judgments", "csv")
    pending = ExportJob.objects.create(study=export_study, kind="pairs", format="csv")
    other_job = ExportJob.objects.create(study=cast.study, kind="pairs", format="csv")
    stranger = make_user("sam-researcher-elsewhere", Role.RESEARCHER)
    annotator = cast.worker_one.user
    assert annotator is not None
    page = reverse("leaderboard:study_export_jobs", args=["mt-bench"])
    download = reverse("leaderboard:export_job_download", args=["mt-bench", done.public_id])

    for user in (cast.outsider, stranger, annotator):
        client.force_login(user)
        assert client.get(page).status_code == 404
        assert client.get(download).status_code == 404
        assert client.post(page, {"kind": "pairs", "format": "csv"}).status_code == 404
    assert ExportJob.objects.count() == 3

    for user in (cast.researcher, cast.admin):
        client.force_login(user)
        listing = client.get(page)
        assert listing.status_code == 200
        assert download in listing.content.decode()
        response = client.get(download)
        assert response.status_code == 200
        assert b"".join(response.streaming_content) == job_bytes(done)  # type: ignore[attr-defined]
        assert 'filename="mt-bench-judgments.csv"' in response["Content-Disposition"]

    client.force_login(cast.admin)
    not_ready = reverse("leaderboard:export_job_download", args=["mt-bench", pending.public_id])
    assert client.get(not_ready).status_code == 404
    # A job of another study is not reachable through this study's URL.
    crossed = reverse("leaderboard:export_job_download", args=["mt-bench", other_job.public_id])
    assert client.get(crossed).status_code == 404
    client.logout()
    assert client.get(download).status_code == 302  # to the login page
