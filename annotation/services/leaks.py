"""Writes about answers that name a model or its maker."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from annotation.models import Answer, Study
from annotation.selectors.studies import study_get_for_user


@transaction.atomic
def answer_leak_clear(*, answer: Answer, user: User) -> Answer:
    """Mark a flagged answer as reviewed and fine to show in pairs (idempotent).

    Only a researcher who is a member of the answer's study, or an admin, may clear it; anyone
    else gets PermissionDenied. The update is conditional, so of two researchers clearing at once
    the first one is recorded.
    """
    study = Study.objects.get(prompts__answers=answer)
    try:
        study_get_for_user(user=user, slug=study.slug)
    except Study.DoesNotExist as exc:
        raise PermissionDenied("Only the study's researchers and admins may clear a flag.") from exc
    Answer.objects.filter(pk=answer.pk, leak_flagged=True, leak_cleared_at__isnull=True).update(
        leak_cleared_by=user, leak_cleared_at=timezone.now()
    )
    answer.refresh_from_db(fields=["leak_cleared_by", "leak_cleared_at"])
    return answer
