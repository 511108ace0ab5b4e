"""URLs of the read-only analysis API, its OpenAPI schema and its docs page."""

from __future__ import annotations

from django.urls import include, path
from rest_framework.renderers import JSONOpenAPIRenderer
from rest_framework.schemas import get_schema_view

from annotation.access import IsResearcherOrAdmin
from core.lazyviews import lazy_view

app_name = "leaderboard_api"

api_patterns = [
    path("studies/", lazy_view("leaderboard.api.StudyListApi"), name="study_list"),
    path(
        "studies/<slug:slug>/report/",
        lazy_view("leaderboard.api.StudyReportApi"),
        name="study_report",
    ),
    path(
        "studies/<slug:slug>/pairs/",
        lazy_view("leaderboard.api.StudyPairListApi"),
        name="study_pairs",
    ),
    path(
        "studies/<slug:slug>/judgments/",
        lazy_view("leaderboard.api.StudyJudgmentListApi"),
        name="study_judgments",
    ),
    path(
        "studies/<slug:slug>/calls/",
        lazy_view("leaderboard.api.StudyCallListApi"),
        name="study_calls",
    ),
]

urlpatterns = [
    path("", lazy_view("leaderboard.api.ApiIndexApi"), name="index"),
    *api_patterns,
    path(
        "schema/",
        get_schema_view(
            title="Concord analysis API",
            description="Read-only: studies, agreement reports, pairs, judgments, judge calls.",
            version="1",
            # Only this API: the annotators' work API is a different audience and document.
            patterns=[path("api/v1/", include((api_patterns, app_name)))],
            renderer_classes=[JSONOpenAPIRenderer],
            # Annotators never read it (nor the API it describes).
            permission_classes=[IsResearcherOrAdmin],
        ),
        name="schema",
    ),
    path("docs/", lazy_view("leaderboard.views.ApiDocsView"), name="docs"),
]
