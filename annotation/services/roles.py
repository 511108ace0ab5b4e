"""Writes of the annotation app. Services take keyword-only arguments and open their transaction."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission, User
from django.db import transaction
from django.db.models import Q

from annotation.models import Study, StudyMembership
from annotation.roles import ADMIN_APPS, RESEARCHER_PERMISSIONS, Role


@transaction.atomic
def roles_sync() -> None:
    """Create the three role groups and give each exactly its permissions (idempotent)."""
    annotator, _ = Group.objects.get_or_create(name=Role.ANNOTATOR)
    annotator.permissions.clear()

    researcher, _ = Group.objects.get_or_create(name=Role.RESEARCHER)
    wanted = Q()
    for dotted in RESEARCHER_PERMISSIONS:
        app_label, codename = dotted.split(".")
        wanted |= Q(content_type__app_label=app_label, codename=codename)
    researcher.permissions.set(Permission.objects.filter(wanted))

    admin, _ = Group.objects.get_or_create(name=Role.ADMIN)
    admin.permissions.set(Permission.objects.filter(content_type__app_label__in=ADMIN_APPS))


@transaction.atomic
def user_role_grant(*, user: User, role: Role) -> None:
    """Put a user in a role's group; admins also get into the Django admin site."""
    group = Group.objects.get(name=role)
    user.groups.add(group)
    if role == Role.ADMIN and not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])


def study_member_add(*, study: Study, user: User) -> StudyMembership:
    """Give a researcher access to one study (idempotent)."""
    membership, _ = StudyMembership.objects.get_or_create(study=study, user=user)
    return membership
