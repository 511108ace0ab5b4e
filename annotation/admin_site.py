"""The Django admin is for admins only.

The model admins do not filter by study membership, so a researcher who also had `is_staff`
would read and change every study there. Instead of filtering every model admin, the site lets
in only superusers and members of the admin role: a researcher is never let in, staff flag or
not, and uses the researcher pages (which check membership) instead.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest

from annotation.roles import Role


class ConcordAdminSite(admin.AdminSite):
    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        return bool(user.is_superuser) or user.groups.filter(name=Role.ADMIN).exists()


class ConcordAdminConfig(AdminConfig):
    default_site = "annotation.admin_site.ConcordAdminSite"
