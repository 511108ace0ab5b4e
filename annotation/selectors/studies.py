"""Reads of the annotation app, each checked against the requesting user."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q, QuerySet

from annotation.models import Study
from annotation.roles import Role


def user_has_role(user: User | AnonymousUser, role: Role) -> bool:
    """True when the user is active and in the role's group (superusers count as admins)."""
    if not user.is_authenticated or not user.is_active:
        return False
    if role == Role.ADMIN and user.is_superuser:
        return True
    return user.groups.filter(name=role).exists()


def study_list_for_user(*, user: User | AnonymousUser) -> QuerySet[Study]:
    """Studies the user may read: every study for an admin, member studies for a researcher,
    none for anyone else."""
    if user_has_role(user, Role.ADMIN):
        return Study.objects.all()
    if isinstance(user, User) and user_has_role(user, Role.RESEARCHER):
        return Study.objects.filter(memberships__user=user)
    return Study.objects.none()


def study_get_for_user(*, user: User | AnonymousUser, slug: str) -> Study:
    """Return the study if the user may read it; raise Study.DoesNotExist otherwise, so that a
    study the user may not see is indistinguishable from one that does not exist."""
    return study_list_for_user(user=user).get(slug=slug)


def study_list_with_counts(*, user: User | AnonymousUser) -> QuerySet[Study]:
    """The user's studies with prompt, pair and judgment counts, in a fixed number of queries."""
    return study_list_for_user(user=user).annotate(
        prompt_count=Count("prompts", distinct=True),
        pair_count=Count("pairs", distinct=True),
        judgment_count=Count("judgments", distinct=True),
        flagged_count=Count(
            "prompts__answers",
            filter=Q(
                prompts__answers__leak_flagged=True, prompts__answers__leak_cleared_at__isnull=True
            ),
            distinct=True,
        ),
    )
