"""A page and an API class that let errors escape, for tests/core/test_errors.py."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.services.errors import AssignmentClosed, JudgmentInvalid
from core.errors import ApplicationError
from leaderboard.services.mtbench_import import MTBenchImportError


def page_raising(request: HttpRequest, kind: str) -> HttpResponse:
    if kind == "import":
        raise MTBenchImportError("line 4 of gpt4.jsonl: 'score' must be 1-10, not 11")
    if kind == "closed":
        raise AssignmentClosed("This pair was already submitted.")
    raise RuntimeError("a bug, not a refusal")


class ApiRaising(APIView):
    def post(self, request: Request, kind: str) -> Response:
        if kind == "invalid":
            raise JudgmentInvalid("Pick one of the seven values.", field="values")
        if kind == "closed":
            raise AssignmentClosed("This pair was already submitted.")
        raise ApplicationError("study 'mt-bench': no judge named 'gpt-5'", code="no_such_judge")


urlpatterns = [
    path("raise/<str:kind>/", page_raising),
    path("api/raise/<str:kind>/", ApiRaising.as_view()),
    path("", include("config.urls")),
]
