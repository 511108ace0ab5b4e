"""HTML pages of the annotation app. Views parse, call one selector or service, and render."""

from __future__ import annotations

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404, is_researcher_or_admin
from annotation.selectors.studies import study_list_with_counts


class HomeView(LoginRequiredMixin, View):
    def get(self, request: HttpRequest) -> HttpResponse:
        if is_researcher_or_admin(request.user):
            return redirect("annotation:study_list")
        return render(request, "annotation/home.html")


class StudyListView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest) -> HttpResponse:
        studies = study_list_with_counts(user=request.user)
        return render(request, "annotation/study_list.html", {"studies": studies})


class StudyDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return render(request, "annotation/study_detail.html", {"study": study})
