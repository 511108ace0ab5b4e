"""Writes to workers' standing in a study: blocking and unblocking."""

from __future__ import annotations

from django.db.models import QuerySet

from annotation.models import Worker


def workers_block(*, workers: QuerySet[Worker]) -> int:
    """Block the given workers from taking more pairs; return how many were not blocked yet."""
    return workers.exclude(state=Worker.State.BLOCKED).update(state=Worker.State.BLOCKED)


def workers_unblock(*, workers: QuerySet[Worker]) -> int:
    """Let blocked workers work again (state active); return how many were blocked."""
    return workers.filter(state=Worker.State.BLOCKED).update(state=Worker.State.ACTIVE)
