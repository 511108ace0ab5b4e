"""The Celery broker seen from the web and the workers: is it there, how long is a queue, send a
task. Every app that queues work uses these, beside the Celery app itself (config/celery.py).

core imports no part of config, so the Celery app is handed in: config/celery.py calls
:func:`app_use` as it makes the app, and `config/__init__.py` imports that module whenever Django
loads the settings, so every process that can queue work has it. (Celery's `current_app` would do
the same only on the thread that made the app.)"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from core.errors import ApplicationError
from core.queues import Queue

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)
_APP: list[Celery] = []


def app_use(app: Celery) -> None:
    """Make `app` the Celery app these helpers publish to and read from (config/celery.py)."""
    _APP[:] = [app]


def _celery() -> Celery:
    if not _APP:
        raise RuntimeError("no Celery app: import config.celery (Django's settings do) first")
    return _APP[0]


class BrokerUnavailable(ApplicationError):
    """The Celery broker does not answer, so work cannot be queued."""

    http_status = 503


def url_label(url: str) -> str:
    """A service URL without any user or password, fit for an error message or a page."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _broker_label() -> str:
    """The URL of the broker the app writes to, without any password, for an error message."""
    return url_label(_celery().conf.broker_write_url or _celery().conf.broker_url)


def broker_check() -> None:
    """Raise BrokerUnavailable unless the broker accepts a connection now."""
    try:
        with _celery().connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=3)
    except Exception as exc:  # noqa: BLE001 - any failure to connect means the same thing
        raise BrokerUnavailable(
            f"the Celery broker at {_broker_label()} does not answer ({exc}); start it or set "
            "CELERY_BROKER_URL. Nothing was queued."
        ) from exc


def worker_consumes(queue: Queue) -> bool:
    """Whether this worker process takes messages from `queue`: the queues its worker was
    started with (`celery worker -Q ...`), or Celery's default queue without -Q."""
    return queue.value in _celery().amqp.queues.consume_from


def queue_length(queue: Queue) -> int:
    """How many messages wait in a queue of the Redis broker (0 when that cannot be read).

    kombu keeps a Redis queue as a list under its name, and one more list per priority step.
    """
    try:
        with _celery().connection_for_read() as conn:
            client = conn.default_channel.client
            sep = "\x06\x16"
            names = [queue.value] + [f"{queue.value}{sep}{step}" for step in (3, 6, 9)]
            return int(sum(client.llen(name) for name in names))
    except Exception:  # noqa: BLE001 - an unreadable queue must not stop the reconciler
        logger.warning("could not read the length of queue %s", queue.value, exc_info=True)
        return 0


def task_send(
    name: str,
    *,
    args: list[int] | list[list[int]],
    queue: Queue,
    countdown: float | None = None,
    recovery: str = "",
    priority: int | None = None,
) -> None:
    """Publish a task by its name on `queue`, retrying twice at once; raise BrokerUnavailable if
    the broker still refuses it. `recovery` ends the error's message: what becomes of the work.

    `priority` is kombu's Redis priority, 0 to 9, lower first: the Redis transport keeps a list
    per step (0, 3, 6, 9) and a worker pops the lists in that order, so a message on step 0 is
    taken before every message waiting on a later step. None is step 0."""
    try:
        _celery().send_task(
            name,
            args=args,
            queue=queue.value,
            countdown=countdown,
            priority=priority,
            retry=True,
            retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5},
        )
    except Exception as exc:  # noqa: BLE001 - any failure to publish means the same thing
        raise BrokerUnavailable(
            f"could not queue {name}: the Celery broker at {_broker_label()} does not answer "
            f"({exc})" + (f"; {recovery}" if recovery else "")
        ) from exc
