"""A thread's database connections end with the thread, so threaded servers stay in budget.

Issue 27, part 6: with persistent connections (CONN_MAX_AGE 600), a server that runs each request
in a thread of its own left one idle PostgreSQL backend per finished thread (51 of the default
max_connections of 100). Here the real WSGI application is served by wsgiref's threaded server
(one new thread per request), and PostgreSQL's own pg_stat_activity counts the backends.
"""

from __future__ import annotations

import socketserver
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from django.core.wsgi import get_wsgi_application
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)

REQUESTS = 40


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def backends_on_test_database() -> int:
    """Backends connected to this test database, other than this thread's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def settled_count(at_most: int, seconds: float = 10.0) -> int:
    """The count once it is at most `at_most`, or the last count after `seconds`."""
    deadline = time.monotonic() + seconds
    count = backends_on_test_database()
    while count > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
        count = backends_on_test_database()
    return count


@pytest.fixture
def threaded_server(settings: object) -> Iterator[str]:
    settings.ALLOWED_HOSTS = ["127.0.0.1"]  # type: ignore[attr-defined]
    server = make_server(
        "127.0.0.1",
        0,
        get_wsgi_application(),
        server_class=ThreadingWSGIServer,
        handler_class=QuietHandler,
    )
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_threaded_server_holds_no_connection_per_finished_request_thread(
    threaded_server: str,
) -> None:
    before = backends_on_test_database()
    for _ in range(REQUESTS):
        # /readyz runs a query on the database: each request opens a connection in a new thread.
        with urllib.request.urlopen(f"{threaded_server}/readyz", timeout=10) as response:
            assert response.status == 200
    # Each request thread ends just after its response: its connection goes with it.
    assert settled_count(at_most=before + 1) <= before + 1


def test_a_thread_that_lives_on_keeps_its_connection_across_tasks() -> None:
    def pid_after_a_task() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    before = backends_on_test_database()
    with ThreadPoolExecutor(max_workers=2) as pool:  # like gunicorn's gthread or Celery's threads
        pids = [pool.submit(pid_after_a_task).result() for _ in range(6)]
        assert len(set(pids)) <= 2  # persistent: the pool's threads reuse theirs
        assert backends_on_test_database() >= before + 1
    # The pool shut down, its threads ended: their connections closed.
    assert settled_count(at_most=before) == before
