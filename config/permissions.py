"""DRF permissions shared by the APIs."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from annotation.roles import Role
from annotation.selectors.studies import user_has_role


class IsResearcherOrAdmin(BasePermission):
    """Only researchers and admins: annotators never read the analysis API or its schema."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated) and (
            user_has_role(user, Role.RESEARCHER) or user_has_role(user, Role.ADMIN)
        )
