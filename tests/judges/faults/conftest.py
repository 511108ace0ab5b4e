"""Fixtures of the fault suite: one private Redis, two workers and beat for the whole module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.services import runs as run_services
from tests.judges.fake_openai import FakeOpenAI
from tests.judges.faults.harness import RESULTS, Cluster, table
from tests.judges.integration import PrivateRedis, broker_purge, broker_url_set


@pytest.fixture(scope="module")
def cluster(
    django_db_setup: None, django_db_blocker: pytest.FixtureRequest, tmp_path_factory
) -> Iterator[Cluster]:
    tmp: Path = tmp_path_factory.mktemp("faults")
    redis = PrivateRedis(tmp)
    redis.start()
    group = Cluster(tmp=tmp, redis=redis)
    try:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            group.worker(wait=False)
            group.worker(wait=False)
            group.beat_start()
            for worker in group.workers:
                worker.wait_ready()
        with broker_url_set(group.broker_url):
            yield group
    finally:
        group.stop()
        redis.shutdown()


@pytest.fixture
def suite(cluster: Cluster, settings, api_key: str) -> Iterator[Cluster]:
    """The cluster, with this process's settings matching the workers' and an empty broker."""
    settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS = 3
    settings.CONCORD_JUDGE_LEASE_SECONDS = 6
    settings.REDIS_URL = cluster.limiter_url
    broker_purge(cluster.broker_url)
    run_services._broker_seen.clear()
    yield cluster
    run_services._broker_seen.clear()


@pytest.fixture
def paid_fake() -> Iterator[FakeOpenAI]:
    """The fake API, ignoring Idempotency-Key as OpenAI does: a resent request is paid again."""
    server = FakeOpenAI(honour_idempotency=False, delay=0.02).start()
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    if RESULTS:
        terminalreporter.write_sep("=", "fault suite: counts per scenario")
        terminalreporter.write_line(table(RESULTS))
