"""Clearing answers flagged for naming their own model or its maker."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import Answer, Study
from annotation.selectors.studies import study_get_for_user


def answers_leak_clear(*, answers: QuerySet[Answer], user: User) -> int:
    """Mark flagged, not yet cleared answers as cleared by `user` now; return how many.

    Cleared answers become usable in pairs; the flag and its matches stay for the record.
    Answers not flagged, or already cleared, are left as they are (one conditional UPDATE, so of
    two people clearing at once the first is recorded). The caller has checked `user`'s access.
    """
    return answers.filter(leak_flagged=True, leak_cleared_at__isnull=True).update(
        leak_cleared_by=user, leak_cleared_at=timezone.now()
    )


@transaction.atomic
def answer_leak_clear(*, answer: Answer, user: User) -> Answer:
    """Clear one flagged answer, if `user` is a researcher of its study or an admin (idempotent).

    Anyone else gets PermissionDenied.
    """
    study = Study.objects.get(prompts__answers=answer)
    try:
        study_get_for_user(user=user, slug=study.slug)
    except Study.DoesNotExist as exc:
        raise PermissionDenied("Only the study's researchers and admins may clear a flag.") from exc
    answers_leak_clear(answers=Answer.objects.filter(pk=answer.pk), user=user)
    answer.refresh_from_db(fields=["leak_cleared_by", "leak_cleared_at"])
    return answer
