"""The one way a Celery task of Concord is made: :func:`task`.

It sets, in one place, what every task shares (Sentry's and PostHog's task rules, STYLE.md):
an explicit stable name (the name messages, beat and `core.broker.task_send` use, so it never
changes with a module's path), the queue it runs on, a late acknowledgement and a rejection
(so a redelivery) when its worker dies, no stored result unless the task asks for one, and a soft
and a hard time limit that each task chooses for what it does.

The soft limit raises :class:`SoftTimeLimitExceeded` inside the task (prefork workers, the
pool every worker of docker/compose.yaml and scripts/demo.py runs), so the service it calls can
record the failure as it records any other: :func:`failure_reason` words it ("stopped at its
time limit of 900 s"). The hard limit kills the worker process some seconds later, for code
stuck in C where no exception can reach it; the message is then rejected and redelivered, and
the service's claim and its reconciler decide what becomes of the half-done work, as after any
killed worker. Every hard limit stays below the broker's visibility timeout
(CELERY_BROKER_TRANSPORT_OPTIONS), or Redis would hand a still-running task's message to a
second worker (tests/core/test_tasks.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded

from core.queues import Queue

__all__ = ["ConcordTask", "SoftTimeLimitExceeded", "failure_reason", "task"]

F = TypeVar("F", bound=Callable[..., Any])


# Each task's queue by its name, as the tasks are made; read by :func:`task_route`.
QUEUES: dict[str, Queue] = {}


class ConcordTask(Task):  # type: ignore[misc]  # celery ships no types: Task is Any to mypy
    """The base of every task :func:`task` builds (how the tests tell them from others)."""

    abstract = True
    # The queue the task runs on (Celery's own `queue` task attribute is deprecated for routes).
    concord_queue: Queue = Queue.DEFAULT


def task_route(name: str, *args: Any, **kwargs: Any) -> dict[str, str] | None:
    """Celery's router (CELERY_TASK_ROUTES): a task goes to the queue it was made with.

    Workers and beat load every task before they send one; a web process sends by name with an
    explicit queue (core.broker.task_send), which Celery's options put before any route.
    """
    queue = QUEUES.get(name)
    return {"queue": queue.value} if queue is not None else None


def task(
    *,
    name: str,
    queue: Queue,
    soft_time_limit: float,
    time_limit: float,
    ignore_result: bool = True,
    **options: Any,
) -> Callable[[F], Any]:
    """Make a Celery task named `name` on `queue`, with the house's options and its time limits.

    `soft_time_limit` (seconds) raises SoftTimeLimitExceeded in the task; `time_limit` kills the
    worker process and must be later. Other options (bind, max_retries, autoretry_for, ...) pass
    through to Celery.
    """
    if not 0 < soft_time_limit < time_limit:
        raise ValueError(
            f"task {name}: the soft time limit ({soft_time_limit:g} s) must be above 0 and "
            f"below the hard one ({time_limit:g} s)"
        )
    clash = {"acks_late", "reject_on_worker_lost", "base"} & options.keys()
    if clash:
        raise ValueError(f"task {name}: core.tasks.task sets {', '.join(sorted(clash))} itself")
    QUEUES[name] = queue
    decorator: Callable[[F], Any] = shared_task(
        name=name,
        concord_queue=queue,
        base=ConcordTask,
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=ignore_result,
        soft_time_limit=soft_time_limit,
        time_limit=time_limit,
        **options,
    )
    return decorator


def failure_reason(exc: BaseException) -> str:
    """What a service records as the reason its work failed: the exception's type and message,
    or for a task stopped at its soft time limit, which limit it was.

    A soft limit that comes during a query leaves psycopg's connection busy with the abandoned
    query ("another command is already in progress"), so the write of the failure would fail
    too; for a SoftTimeLimitExceeded this closes such a connection first, and Django opens a new
    one for that write. Call it before the write, as the argument of the UPDATE.
    """
    if isinstance(exc, SoftTimeLimitExceeded):
        from celery import current_task

        _connection_free()

        limit = getattr(current_task, "soft_time_limit", None) if current_task else None
        of = f" of {limit:g} s" if isinstance(limit, int | float) else ""
        return (
            f"stopped at its time limit{of} (SoftTimeLimitExceeded): the work took longer "
            "than its task allows"
        )
    return f"{type(exc).__name__}: {exc}"


def _connection_free() -> None:
    """Close Django's default connection when a query is still running on it (see above)."""
    from django.db import connection
    from psycopg.pq import TransactionStatus

    raw = connection.connection
    if raw is not None and raw.pgconn.transaction_status == TransactionStatus.ACTIVE:
        connection.close()
