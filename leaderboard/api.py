"""Read-only API for researchers: their studies, a study's agreement report and its raw rows.

One small API class per operation, each with its own output serializer. Session authentication;
researchers see the studies they are members of, admins every study, anyone else none (a study
they may not read is a 404, as on the pages).
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.module_loading import import_string
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.views import APIView

from annotation.access import IsResearcherOrAdmin, get_study_or_404
from annotation.models import HumanJudgment, Pair, Study
from judges.models import JudgeCall
from leaderboard.forms import AnalysisFilterForm
from leaderboard.selectors.api import api_study_list
from leaderboard.selectors.exports import RATING_COLUMNS, judgments_with_ratings
from leaderboard.selectors.snapshots import study_data_fingerprint
from leaderboard.services.reports import report_state_get


class _Page(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class _SchemaSerializerMixin:
    """Let DRF's schema generator describe the response with the output serializer."""

    OutputSerializer: type[serializers.Serializer[Any]]

    def get_serializer(self, *args: Any, **kwargs: Any) -> serializers.Serializer[Any]:
        return self.OutputSerializer(*args, **kwargs)


def _route_template(route: str) -> str:
    """A URL pattern's route as a template a client fills in: `<slug:slug>` becomes `{slug}`."""
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


class ApiIndexApi(APIView):
    """What the API offers: each endpoint's URL template and purpose, the schema and the docs."""

    permission_classes = [IsResearcherOrAdmin]
    schema = None  # the index describes the schema; the schema need not describe the index

    def get(self, request: Request) -> Response:
        from leaderboard.api_urls import api_patterns  # the URLs import this module

        # The templates' braces stay as they are (build_absolute_uri would percent-encode them).
        base = request.build_absolute_uri(reverse("leaderboard_api:index"))
        endpoints = []
        for pattern in api_patterns:
            view = import_string(pattern.callback.dotted)  # type: ignore[attr-defined]
            summary = inspect.getdoc(view) or ""
            endpoints.append(
                {
                    "name": pattern.name,
                    "url": base + _route_template(str(pattern.pattern)),
                    "methods": ["GET"],
                    "description": " ".join(summary.split("\n\n")[0].split()),
                }
            )
        login = request.build_absolute_uri(reverse("login"))
        return Response(
            {
                "name": "Concord analysis API",
                "version": "1",
                "read_only": True,
                "authentication": f"session: log in at {login}",
                "schema": request.build_absolute_uri(reverse("leaderboard_api:schema")),
                "docs": request.build_absolute_uri(reverse("leaderboard_api:docs")),
                "endpoints": endpoints,
            }
        )


class StudyListApi(_SchemaSerializerMixin, APIView):
    """The studies the user may read, with their counts."""

    permission_classes = [IsAuthenticated]
    schema = AutoSchema(operation_id_base="Study", component_name="Study", tags=["studies"])

    class OutputSerializer(serializers.Serializer[Study]):
        slug = serializers.SlugField()
        name = serializers.CharField()
        status = serializers.CharField()
        notes = serializers.CharField()
        prompt_count = serializers.IntegerField()
        pair_count = serializers.IntegerField()
        judgment_count = serializers.IntegerField()

    def get(self, request: Request) -> Response:
        studies = api_study_list(user=request.user)
        return Response(self.OutputSerializer(studies, many=True).data)  # type: ignore[arg-type]


class StudyReportApi(APIView):
    """The study's agreement report (the JSON of `agreement_report`), for the query's filters:
    category, turn, exclude_gold, raters (experts|all), run (repeatable judge run id).

    Served from the stored snapshot: 202 with a status while the first computation runs; the
    header X-Concord-Report says "stale" when the data changed since (a recompute is queued)."""

    permission_classes = [IsAuthenticated]
    schema = AutoSchema(operation_id_base="StudyReport", tags=["reports"])

    def get(self, request: Request, slug: str) -> Response:
        study = get_study_or_404(request, slug)
        fingerprint = study_data_fingerprint(study=study)
        form = AnalysisFilterForm(request.query_params, study=study, fingerprint=fingerprint)
        if not form.is_valid():
            raise serializers.ValidationError(form.errors.get_json_data())
        state = report_state_get(study=study, filters=form.filters(), fingerprint=fingerprint)
        if state.payload is None:
            waiting = Response(
                {"status": "computing", "detail": "The report is being computed; ask again."},
                status=202,
            )
            waiting["Retry-After"] = "3"
            return waiting
        response = Response(state.payload)
        # "current", or "stale": computed from older data, a recompute is queued.
        response["X-Concord-Report"] = state.status
        return response


class _RowsApi(_SchemaSerializerMixin, APIView, ABC):
    permission_classes = [IsAuthenticated]
    pagination_class = _Page

    @abstractmethod
    def rows(self, study: Study) -> QuerySet[Any]:
        """The study's rows this endpoint lists, in a stable order."""

    def get(self, request: Request, slug: str) -> Response:
        study = get_study_or_404(request, slug)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(self.rows(study), request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class StudyPairListApi(_RowsApi):
    """The study's pairs (agreement units), by id."""

    schema = AutoSchema(operation_id_base="StudyPair", component_name="Pair", tags=["rows"])

    class OutputSerializer(serializers.Serializer[Pair]):
        id = serializers.IntegerField()
        prompt = serializers.CharField(source="prompt.external_id")
        category = serializers.CharField(source="prompt.category")
        turn = serializers.IntegerField()
        system_a = serializers.CharField(source="answer_a.system.name")
        system_b = serializers.CharField(source="answer_b.system.name")
        source = serializers.CharField()  # type: ignore[assignment]
        is_gold = serializers.BooleanField()
        gold_side = serializers.CharField()

    def rows(self, study: Study) -> QuerySet[Any]:
        return (
            Pair.objects.filter(study=study)
            .select_related("prompt", "answer_a__system", "answer_b__system")
            .order_by("pk")
        )


def _rating(name: str) -> serializers.CharField:
    """A rating of one side, as `judgments_with_ratings` reads it (null where not asked)."""
    assert name in RATING_COLUMNS, name
    return serializers.CharField(source=f"rating_{name}", allow_null=True)


class StudyJudgmentListApi(_RowsApi):
    """The study's human judgments, by id; the rater is the panel's participant id. Each
    answer's ratings, where the study asks them: acceptability_a / _b (accept, reject, unsure)
    and relevance, usefulness, factuality _a / _b (no, partial, yes); null where not asked."""

    schema = AutoSchema(operation_id_base="StudyJudgment", component_name="Judgment", tags=["rows"])

    class OutputSerializer(serializers.Serializer[HumanJudgment]):
        id = serializers.IntegerField()
        pair = serializers.IntegerField(source="pair_id")
        panel = serializers.CharField(source="worker.panel")
        rater = serializers.CharField(source="worker.external_id")
        is_imported = serializers.BooleanField()
        a_left = serializers.BooleanField(allow_null=True)
        likert_shown = serializers.IntegerField(allow_null=True)
        likert = serializers.IntegerField(allow_null=True)
        preference = serializers.CharField()
        values = serializers.ListField(child=serializers.CharField())
        reason = serializers.CharField()
        duration_ms = serializers.IntegerField(allow_null=True)
        created_at = serializers.DateTimeField()
        acceptability_a = _rating("acceptability_a")
        acceptability_b = _rating("acceptability_b")
        relevance_a = _rating("relevance_a")
        relevance_b = _rating("relevance_b")
        usefulness_a = _rating("usefulness_a")
        usefulness_b = _rating("usefulness_b")
        factuality_a = _rating("factuality_a")
        factuality_b = _rating("factuality_b")

    def rows(self, study: Study) -> QuerySet[Any]:
        """The study's judgments but those of excluded participants, as in the exports: an
        exclusion (annotation's worker_exclude) takes a participant out of every analysis."""
        judgments = HumanJudgment.objects.filter(study=study, excluded=False)
        return judgments_with_ratings(judgments.select_related("worker")).order_by("pk")


class StudyCallListApi(_RowsApi):
    """The judge calls on the study's pairs, by id, with the raw output."""

    schema = AutoSchema(operation_id_base="StudyCall", component_name="JudgeCall", tags=["rows"])

    class OutputSerializer(serializers.Serializer[JudgeCall]):
        id = serializers.IntegerField()
        run = serializers.IntegerField(source="run_id")
        judge = serializers.CharField(source="run.judge.name")
        pair = serializers.IntegerField(source="pair_id", allow_null=True)
        answer = serializers.IntegerField(
            source="answer_id", allow_null=True, help_text="A grade call's answer (pair empty)."
        )
        grade = serializers.FloatField(allow_null=True, help_text="A grade call's grade, 1-10.")
        turn = serializers.IntegerField(
            help_text="The turn the call judged: a pair call's pair's turn, unless its judge "
            "judges every turn of the prompt; a grade call's turn."
        )
        order = serializers.CharField()
        status = serializers.CharField()
        likert_shown = serializers.IntegerField(allow_null=True)
        likert = serializers.IntegerField(allow_null=True)
        preference = serializers.CharField()
        verdict_label = serializers.CharField()
        parse_error = serializers.CharField()
        raw_output = serializers.CharField()
        cost_usd = serializers.DecimalField(max_digits=12, decimal_places=8)

    def rows(self, study: Study) -> QuerySet[Any]:
        calls = JudgeCall.objects.filter(run__study=study).select_related("run__judge")
        return calls.order_by("pk")
