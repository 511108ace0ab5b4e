"""URLs of the read-only analysis API, its OpenAPI schema and its docs page."""

from __future__ import annotations

from django.urls import include, path
from rest_framework.renderers import JSONOpenAPIRenderer
from rest_framework.schemas import get_schema_view

from leaderboard import api, views

app_name = "leaderboard_api"

api_patterns = [
    path("studies/", api.StudyListApi.as_view(), name="study_list"),
    path("studies/<slug:slug>/report/", api.StudyReportApi.as_view(), name="study_report"),
    path("studies/<slug:slug>/pairs/", api.StudyPairListApi.as_view(), name="study_pairs"),
    path(
        "studies/<slug:slug>/judgments/",
        api.StudyJudgmentListApi.as_view(),
        name="study_judgments",
    ),
    path("studies/<slug:slug>/calls/", api.StudyCallListApi.as_view(), name="study_calls"),
]

urlpatterns = [
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
        ),
        name="schema",
    ),
    path("docs/", views.ApiDocsView.as_view(), name="docs"),
]
