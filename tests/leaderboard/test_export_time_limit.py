"""An export stopped at its soft time limit in the middle of a query is recorded failed with the
limit as its reason, not left running: the limit is delivered as the prefork pool delivers it
(billiard's handler raising SoftTimeLimitExceeded from a signal), here while another session
holds a lock that keeps the export's read waiting."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import psycopg
import pytest
from billiard.pool import soft_timeout_sighandler  # type: ignore[import-untyped]
from django.conf import settings

from annotation.models import HumanJudgment, Study
from leaderboard.models import ExportJob
from leaderboard.services.export_jobs import exports_dir
from leaderboard.tasks import export_build
from tests.conftest import Cast

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def judgments_locked() -> Iterator[None]:
    """Another session holds the judgments table in ACCESS EXCLUSIVE mode until the test ends."""
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], password=db["PASSWORD"],
        dbname=db["NAME"],
    ) as other:  # fmt: skip
        other.execute(f'LOCK TABLE "{HumanJudgment._meta.db_table}" IN ACCESS EXCLUSIVE MODE')
        yield
        other.rollback()


def test_an_export_stopped_at_its_soft_time_limit_is_failed_with_the_limit_as_reason(
    export_study: Study, cast: Cast, judgments_locked: None
) -> None:
    job = ExportJob.objects.create(
        study=export_study, requested_by=cast.researcher, kind="judgments", format="csv"
    )
    previous = signal.signal(signal.SIGALRM, soft_timeout_sighandler)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        result = export_build.apply(args=[job.pk])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert result.failed()
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED
    assert job.error.startswith("stopped at its time limit of 1200 s"), job.error
    assert not list(exports_dir().glob(".*.partial"))
