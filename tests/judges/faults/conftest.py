"""Fixtures of the fault suite: one private Redis, two workers and beat for the whole module."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import OperationalError, connection
from django.db.backends.postgresql.operations import DatabaseOperations

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


def _flush_retrying(flush: Callable[..., Any]) -> Callable[..., Any]:
    """The test database's flush (one TRUNCATE of every table), tried again when PostgreSQL
    ends it as a deadlock victim: the workers and beat of this module outlive each test, and a
    reconciler's read that holds one table while it waits for another one the TRUNCATE has
    already locked is a deadlock PostgreSQL may settle by cancelling the TRUNCATE (seen in a
    clean-clone run: the budget test's teardown failed and the next test found its rows)."""

    def flush_retrying(self: DatabaseOperations, sql_list: list[str]) -> None:
        for attempt in range(5):
            try:
                return flush(self, sql_list)
            except OperationalError as exc:
                if not isinstance(exc.__cause__, psycopg.errors.DeadlockDetected) or attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))

    return flush_retrying


@pytest.fixture(scope="module", autouse=True)
def flush_survives_the_workers() -> Iterator[None]:
    flush = DatabaseOperations.execute_sql_flush
    DatabaseOperations.execute_sql_flush = _flush_retrying(flush)  # type: ignore[method-assign]
    try:
        yield
    finally:
        DatabaseOperations.execute_sql_flush = flush  # type: ignore[method-assign]


def _workers_quiet(*, timeout: float = 30.0, still: float = 1.0) -> None:
    """Wait until no other session of the test database has run a statement for `still`
    seconds (the workers have finished what they held), or `timeout` has passed."""
    quiet_since: float | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state <> 'idle'"
            )
            busy = cursor.fetchone()[0]
        now = time.monotonic()
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= still:
            return
        time.sleep(0.1)


@pytest.fixture
def suite(cluster: Cluster, settings, api_key: str, transactional_db: None) -> Iterator[Cluster]:
    """The cluster, with this process's settings matching the workers' and an empty broker.

    After the test, what is still queued is dropped and the workers are let finish what they
    hold before the database is emptied for the next test (this fixture needs the database, so
    its end comes before the flush): a run stopped by its budget leaves most of its calls'
    messages queued, and workers taking them during the flush raced it."""
    settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS = 3
    settings.CONCORD_JUDGE_LEASE_SECONDS = 6
    settings.REDIS_URL = cluster.limiter_url
    broker_purge(cluster.broker_url)
    run_services._broker_seen.clear()
    yield cluster
    run_services._broker_seen.clear()
    broker_purge(cluster.broker_url)
    _workers_quiet()


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
