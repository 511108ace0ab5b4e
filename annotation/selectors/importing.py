"""Reads behind the import and flagged-answer pages, each checked against the requesting user."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from annotation.models import Answer, Study
from annotation.roles import Role
from annotation.selectors.studies import study_get_for_user, user_has_role


def study_get_for_import(*, user: User | AnonymousUser, slug: str) -> Study:
    """Return the study if the user may import into it: an admin, or a researcher who is a member
    and holds annotation.import_study. Raise Study.DoesNotExist otherwise, as for a study that
    does not exist."""
    study = study_get_for_user(user=user, slug=slug)
    if user_has_role(user, Role.ADMIN) or user.has_perm("annotation.import_study"):
        return study
    raise Study.DoesNotExist


def answer_list_flagged(*, user: User | AnonymousUser, study: Study) -> QuerySet[Answer]:
    """Answers of the study that name a model or its maker, uncleared first; none unless the user
    may read the study."""
    try:
        study_get_for_user(user=user, slug=study.slug)
    except Study.DoesNotExist:
        return Answer.objects.none()
    return (
        Answer.objects.filter(prompt__study=study, leak_flagged=True)
        .select_related("prompt", "system", "leak_cleared_by")
        .order_by("-leak_cleared_at", "prompt__external_id", "system__name", "pk")
    )


def answer_get_flagged(*, user: User | AnonymousUser, study: Study, answer_id: int) -> Answer:
    """One flagged answer of the study; raise Answer.DoesNotExist if the user may not see it."""
    return answer_list_flagged(user=user, study=study).get(pk=answer_id)
