"""Database connections persist across requests and tasks, and a dropped one is replaced."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import close_old_connections, connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoWrapper

import core.db.postgresql.base

pytestmark = pytest.mark.django_db(transaction=True)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_connections_persist_by_default_with_health_checks() -> None:
    database = settings.DATABASES["default"]
    assert database["CONN_MAX_AGE"] >= 60
    assert database["CONN_HEALTH_CHECKS"] is True


def test_the_next_request_reuses_the_connection_of_the_last() -> None:
    first = backend_pid()
    # What Django runs when a request (or, through Celery's Django fixup, a task) ends and the
    # next begins.
    close_old_connections()
    close_old_connections()
    assert backend_pid() == first


def test_a_connection_the_server_dropped_is_replaced_at_the_next_request() -> None:
    first = backend_pid()
    with connection.cursor() as cursor:
        cursor.execute("SET application_name = 'doomed'")
    import psycopg

    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as other:
        # Waits until the backend is gone (as it is long before a real next request).
        other.execute("SELECT pg_terminate_backend(%s, 10000)", [first])
    close_old_connections()  # the next request begins: the health check finds it dead
    assert backend_pid() != first


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The health checks that asked the server (Django's own SELECT 1), by backend pid."""
    asked: list[int] = []
    original = DjangoWrapper.is_usable

    def counting(self: DjangoWrapper) -> bool:
        asked.append(self.connection.info.backend_pid if self.connection else 0)
        return original(self)

    monkeypatch.setattr(DjangoWrapper, "is_usable", counting)
    yield asked


def next_request() -> int:
    """What the start of a request does to the connection, then its first statement."""
    close_old_connections()
    return backend_pid()


def test_the_backend_is_concords_with_the_cheaper_health_check() -> None:
    assert settings.DATABASES["default"]["ENGINE"] == "core.db.postgresql"
    assert isinstance(connections["default"], core.db.postgresql.base.DatabaseWrapper)


def test_a_connection_checked_recently_with_a_quiet_socket_is_reused_without_a_round_trip(
    round_trips: list[int],
) -> None:
    first = next_request()
    second = next_request()  # the first check of this connection asks the server
    assert second == first and round_trips == [first]
    for _ in range(3):
        assert next_request() == first
    assert round_trips == [first]  # quiet socket, checked just now: no more round trips


def test_the_round_trip_comes_back_once_it_is_due(
    round_trips: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = next_request()
    next_request()
    assert round_trips == [first]
    monkeypatch.setattr(core.db.postgresql.base, "RECHECK_SECONDS", 0.0)
    assert next_request() == first
    assert round_trips == [first, first]


def test_anything_waiting_on_the_socket_gets_the_round_trip(round_trips: list[int]) -> None:
    first = next_request()
    next_request()
    with connection.cursor() as cursor:
        cursor.execute("LISTEN concord_health")
    import psycopg

    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("NOTIFY concord_health")  # arrives on our idle connection's socket, unread
    waited = 0.0
    while not core.db.postgresql.base._something_waiting(connection.connection.fileno()):
        assert waited < 5, "the notification never arrived"
        time.sleep(0.01)
        waited += 0.01
    assert next_request() == first
    assert round_trips == [first, first]


def test_a_dropped_connection_is_found_even_right_after_a_check(round_trips: list[int]) -> None:
    first = next_request()
    next_request()
    assert connection._checked_at > -math.inf  # type: ignore[attr-defined]
    import psycopg

    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s, 10000)", [first])
    replaced = next_request()
    assert replaced != first and round_trips[-1] == first
