"""HTML pages of the annotation app. Views parse, call one selector or service, and render."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.views import View

from annotation.models import Study
from annotation.roles import Role
from annotation.selectors.studies import study_get_for_user, study_list_with_counts, user_has_role


class HomeView(LoginRequiredMixin, View):
    def get(self, request: HttpRequest) -> HttpResponse:
        if user_has_role(request.user, Role.ADMIN) or user_has_role(request.user, Role.RESEARCHER):
            return redirect("annotation:study_list")
        return render(request, "annotation/home.html")


class ResearcherRequiredMixin(LoginRequiredMixin):
    """Only researchers and admins; anyone else gets a 404, not a hint that the page exists."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not (
            user_has_role(request.user, Role.RESEARCHER) or user_has_role(request.user, Role.ADMIN)
        ):
            raise Http404
        return super().dispatch(request, *args, **kwargs)


def get_study_or_404(request: HttpRequest, slug: str) -> Study:
    """The study named in the URL, if the requesting user may read it."""
    try:
        return study_get_for_user(user=request.user, slug=slug)
    except Study.DoesNotExist as exc:
        raise Http404("No such study.") from exc


class StudyListView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest) -> HttpResponse:
        studies = study_list_with_counts(user=request.user)
        return render(request, "annotation/study_list.html", {"studies": studies})


class StudyDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return render(request, "annotation/study_detail.html", {"study": study})
