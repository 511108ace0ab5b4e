"""Database connections persist across requests and tasks, and a dropped one is replaced."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import close_old_connections, connection

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
        other.execute("SELECT pg_terminate_backend(%s)", [first])
    close_old_connections()  # the next request begins: the health check finds it dead
    assert backend_pid() != first
