"""Reads of the annotation app, each checked against the requesting user."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study
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


def _count_per_study(queryset: QuerySet[Any], study_field: str) -> Coalesce:
    """A correlated COUNT of `queryset`'s rows that belong to the outer study, 0 when none.

    Counting in subqueries, not over joins: joining prompts, pairs and judgments at once would
    multiply the rows (a study with 10k pairs and 30k judgments would count 3e8 rows).
    """
    counted = (
        queryset.filter(**{study_field: OuterRef("pk")})
        .order_by()
        .values(study_field)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def study_list_with_counts(*, user: User | AnonymousUser) -> QuerySet[Study]:
    """The user's studies with prompt, pair, judgment and flagged-answer counts, in one query."""
    flagged = Answer.objects.filter(leak_flagged=True, leak_cleared_at__isnull=True)
    return study_list_for_user(user=user).annotate(
        prompt_count=_count_per_study(Prompt.objects.all(), "study"),
        pair_count=_count_per_study(Pair.objects.all(), "study"),
        judgment_count=_count_per_study(HumanJudgment.objects.all(), "study"),
        flagged_count=_count_per_study(flagged, "prompt__study"),
    )


def user_may_configure_study(*, user: User | AnonymousUser, study: Study) -> bool:
    """True for admins and for members of the study who hold `annotation.change_study`."""
    if not user.is_authenticated:
        return False
    if user_has_role(user, Role.ADMIN):
        return True
    return (
        user.has_perm("annotation.change_study")
        and study_list_for_user(user=user).filter(pk=study.pk).exists()
    )


def study_member_list(*, study: Study) -> list[tuple[User, str]]:
    """The study's members with the role each holds ("Admin" or "Researcher"), by username."""
    users = (
        User.objects.filter(study_memberships__study=study)
        .prefetch_related("groups")
        .order_by("username")
    )
    members = []
    for user in users:
        groups = {group.name for group in user.groups.all()}
        role = "Admin" if user.is_superuser or Role.ADMIN in groups else "Researcher"
        if role == "Researcher" and Role.RESEARCHER not in groups:
            role = "No role (cannot open the study)"
        members.append((user, role))
    return members
