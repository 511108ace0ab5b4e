"""Writes of the annotation app. Services take keyword-only arguments and open their transaction."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission, User
from django.core.exceptions import ValidationError
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


def study_member_add_by_name(*, study: Study, identifier: str) -> StudyMembership:
    """Add a researcher (or admin) to a study by username or e-mail; ValidationError otherwise.

    Workers and outsiders are never members: membership opens the study's data and pay.
    """
    identifier = identifier.strip()
    if not identifier:
        raise ValidationError({"identifier": "Give a username or an e-mail address."})
    matches = list(
        User.objects.filter(
            Q(username__iexact=identifier) | Q(email__iexact=identifier), is_active=True
        )[:2]
    )
    if not matches:
        raise ValidationError(
            {"identifier": f"No active user has the username or e-mail {identifier!r}."}
        )
    if len(matches) > 1:
        raise ValidationError(
            {"identifier": f"{identifier!r} matches more than one user; use the username."}
        )
    user = matches[0]
    if not (
        user.is_superuser or user.groups.filter(name__in=[Role.RESEARCHER, Role.ADMIN]).exists()
    ):
        raise ValidationError(
            {
                "identifier": f"{user.username} is not a researcher; an admin gives the "
                "researcher role first."
            }
        )
    return study_member_add(study=study, user=user)


@transaction.atomic
def study_member_remove(*, study: Study, user: User) -> None:
    """Take a member out of a study; the last member stays, so the study is never orphaned.

    Locks the study's membership rows, so two removals at once cannot both pass the check.
    """
    memberships = list(StudyMembership.objects.select_for_update().filter(study=study))
    if not any(membership.user_id == user.pk for membership in memberships):
        raise ValidationError(f"{user.username} is not a member of this study.")
    if len(memberships) == 1:
        raise ValidationError(
            f"{user.username} is the last member of this study; add another researcher first."
        )
    StudyMembership.objects.filter(study=study, user=user).delete()
