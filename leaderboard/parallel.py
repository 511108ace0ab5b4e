"""Run a report's independent parts at once, in threads.

A report's heavy parts spend their time where Python's global lock is released: PostgreSQL
building a result in its own server process, numpy and the compiled Elo kernel working on arrays.
Threads let two such parts use the machine's two cores together.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection


def database_threads_safe() -> bool:
    """Whether reads may run on connections of their own: outside a transaction.

    Inside a transaction (a test case, an atomic block) other connections would not see its
    rows.
    """
    return not connection.in_atomic_block


def run_parallel(*tasks: Callable[[], Any], uses_database: bool) -> list[Any]:
    """Run the tasks and return their results in order: each in a thread of its own, or one
    after another here when they use the database and :func:`database_threads_safe` says no.

    A thread's database connection is its own and is closed when its task ends. The first
    task's error (in order) is raised once all have ended.
    """
    if len(tasks) < 2 or (uses_database and not database_threads_safe()):
        return [task() for task in tasks]

    def on_own_connection(task: Callable[[], Any]) -> Any:
        try:
            return task()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(tasks), thread_name_prefix="report") as pool:
        futures = [pool.submit(on_own_connection, task) for task in tasks]
        return [future.result() for future in futures]
