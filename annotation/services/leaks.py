"""Clearing answers flagged for naming their own model or its maker."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import Answer


def answers_leak_clear(*, answers: QuerySet[Answer], user: User) -> int:
    """Mark flagged, not yet cleared answers as cleared by `user` now; return how many.

    Cleared answers become usable in pairs; the flag and its matches stay for the record.
    Answers not flagged, or already cleared, are left as they are (one conditional UPDATE).
    """
    return answers.filter(leak_flagged=True, leak_cleared_at__isnull=True).update(
        leak_cleared_by=user, leak_cleared_at=timezone.now()
    )
