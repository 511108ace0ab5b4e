"""Django's PostgreSQL backend, with a health check that skips the round trip when it can.

With CONN_HEALTH_CHECKS, Django checks a persistent connection before each request reuses it by
running `SELECT 1`: a round trip per request, a fifth of the statements of the annotator's next.
A connection the server (or a proxy) dropped says so on its socket, though: PostgreSQL sends an
error and closes it when a backend is terminated, shut down or timed out, and a closed socket
reads as end of file. So a connection that passed a round-trip check less than RECHECK_SECONDS
ago, sits idle outside a transaction, had no error since, and has nothing waiting on its socket
is taken as usable without one; anything else gets Django's own check. A peer that vanished
without a word (a NAT or firewall dropping an idle flow silently) is caught by the round trip,
which runs again once a connection has gone RECHECK_SECONDS without one; such devices drop flows
after minutes of silence, not seconds.

A connection opened in any thread but the main one is also closed when that thread ends
(_ClosedAtThreadEnd). Django closes a persistent connection only when a request or task begins
or ends past CONN_MAX_AGE, in the thread that holds it; a server or pool that runs each request in
a thread of its own (wsgiref's ThreadingMixIn, a ThreadPoolExecutor that is shut down) would
otherwise leave each finished thread's connection open on the server until the garbage collector
happens to free its wrapper, which sits in reference cycles: one idle backend per finished thread.
Threads that live on (gunicorn's gthread pool, Celery's thread pool) keep theirs, as persistence
intends.
"""

from __future__ import annotations

import contextlib
import math
import select
import threading
import time
from typing import Any

from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus

# How long a round-trip check vouches for an idle connection with a quiet socket.
RECHECK_SECONDS = 10.0


def _something_waiting(fileno: int) -> bool:
    """Whether the socket has anything to read (data, end of file or an error), without waiting."""
    if not hasattr(select, "poll"):  # Windows
        readable, _, failed = select.select([fileno], [], [fileno], 0)
        return bool(readable or failed)
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


class _ClosedAtThreadEnd:
    """The connections one thread opened, closed when the thread ends.

    Kept in a threading.local, whose per-thread values CPython releases as the thread finishes,
    so __del__ runs then (nothing else refers to this object). The psycopg connection is closed
    directly: Django's own close() refuses to run outside the thread that owns the wrapper.
    """

    def __init__(self) -> None:
        self.wrappers: list[Any] = []

    def __del__(self) -> None:
        for wrapper in self.wrappers:
            raw = wrapper.connection
            if raw is not None and not raw.closed:
                # The thread is ending: there is no one to tell of a failure.
                with contextlib.suppress(Exception):
                    raw.close()


_this_thread = threading.local()


def _close_at_thread_end(wrapper: Any) -> None:
    if threading.current_thread() is threading.main_thread():
        return  # the process's own thread: its connection lives as long as the process
    closer = getattr(_this_thread, "closer", None)
    if closer is None:
        closer = _this_thread.closer = _ClosedAtThreadEnd()
    if wrapper not in closer.wrappers:
        closer.wrappers.append(wrapper)


class DatabaseWrapper(base.DatabaseWrapper):
    _checked_at = -math.inf  # when the last round-trip check passed (monotonic)

    def get_new_connection(self, conn_params: dict[str, object]) -> object:
        self._checked_at = -math.inf
        raw = super().get_new_connection(conn_params)
        _close_at_thread_end(self)
        return raw

    def is_usable(self) -> bool:
        connection = self.connection
        if (
            connection is not None
            and not self.errors_occurred
            and time.monotonic() - self._checked_at < RECHECK_SECONDS
            and not connection.closed
            and connection.info.transaction_status == TransactionStatus.IDLE
            and not _something_waiting(connection.fileno())
        ):
            return True
        usable: bool = super().is_usable()
        self._checked_at = time.monotonic() if usable else -math.inf
        return usable
