"""Who may open a researcher's page or API: the access checks that every app's doors share.

Views, API classes and their URLs import these; they hold no rule of their own beyond the study's
own membership, which `annotation.selectors.studies` decides. An outsider gets a 404, never a hint
that the page or the study exists; an anonymous visitor of an HTML page is sent to log in.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404, HttpRequest, HttpResponseBase
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from annotation.models import Study
from annotation.roles import Role
from annotation.selectors.studies import study_get_for_user, user_has_role


def is_researcher_or_admin(user: User | AnonymousUser) -> bool:
    """True for a logged-in user who holds the researcher or the admin role."""
    return bool(user.is_authenticated) and (
        user_has_role(user, Role.RESEARCHER) or user_has_role(user, Role.ADMIN)
    )


class ResearcherRequiredMixin(LoginRequiredMixin):
    """Only researchers and admins; anyone else gets a 404, not a hint that the page exists."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not is_researcher_or_admin(request.user):
            raise Http404
        return super().dispatch(request, *args, **kwargs)


class IsResearcherOrAdmin(BasePermission):
    """Only researchers and admins: annotators never read the analysis API or its schema."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user) and is_researcher_or_admin(request.user)


def get_study_or_404(request: HttpRequest | Request, slug: str) -> Study:
    """The study named in the URL, if the requesting user may read it (a page or an API call)."""
    try:
        return study_get_for_user(user=request.user, slug=slug)
    except Study.DoesNotExist as exc:
        raise Http404("No such study.") from exc
