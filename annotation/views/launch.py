"""The launch checklist, the worker's-eye preview of the forms, and the launch itself."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views import View

from annotation.access import ResearcherRequiredMixin
from annotation.models import FINE_GRAINED_AXES, Acceptability, Assignment, Study
from annotation.selectors.checklist import (
    prolific_entry_url,
    study_checklist,
    study_pay_plan,
    study_preview_pair,
)
from annotation.selectors.work import Progress, work_item_build
from annotation.services.entry import entry_link_signature
from annotation.services.errors import JudgmentInvalid
from annotation.services.judgments import judgment_preview_check
from annotation.services.studies import StudyLaunchBlocked, study_launch, study_preview_mark
from annotation.views.setup import study_for_config_or_404
from annotation.views.work import AXIS_CHOICES, LIKERT_CHOICES, parse_judgment_post
from core.conventions import SEVEN_VALUES


def entry_link(request: HttpRequest, study: Study) -> str:
    path = reverse("work:enter", args=[study.slug, "prolific"])
    signature = entry_link_signature(study=study) if study.entry_link_required else ""
    return prolific_entry_url(study_url=request.build_absolute_uri(path), signature=signature)


class StudyChecklistView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        context = {
            "study": study,
            "checklist": study_checklist(study=study),
            "plan": study_pay_plan(study=study),
            "entry_link": entry_link(request, study),
        }
        return render(request, "annotation/study_checklist.html", context)


class StudyLaunchView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        try:
            study_launch(study=study)
        except StudyLaunchBlocked as exc:
            for problem in exc.problems:
                messages.error(request, f"Not launched: {problem}.")
        else:
            messages.success(
                request, "The study is live. Paste the entry link below into Prolific."
            )
        return redirect("annotation:study_checklist", slug=study.slug)


class StudyPreviewView(ResearcherRequiredMixin, View):
    """The work page exactly as a worker sees it, on one of the study's pairs.

    Nothing is written but the preview mark: the assignment shown is built in memory, so no slot
    is held and no judgment, count or pay comes of it. Submitting checks the answer by the
    worker's rules and says whether it would be accepted.
    """

    def _context(self, study: Study, posted: dict[str, Any] | None = None) -> dict[str, Any]:
        pair = study_preview_pair(study=study)
        context: dict[str, Any] = {"study": study, "preview": True, "pair_missing": pair is None}
        if pair is None:
            return context
        now = timezone.now()
        assignment = Assignment(
            study=study,
            pair=pair,
            a_left=True,
            reserved_at=now,
            expires_at=now + timedelta(seconds=study.time_limit_seconds),
        )
        context |= {
            "assignment": assignment,
            "item": work_item_build(assignment=assignment),
            "progress": Progress(done=0, target=study.target_per_worker),
            "submission_id": uuid.uuid4(),
            "likert_choices": LIKERT_CHOICES,
            "seven_values": SEVEN_VALUES,
            "acceptability_choices": Acceptability.choices,
            "axes": FINE_GRAINED_AXES,
            "axis_choices": AXIS_CHOICES,
            "ask_values": study.form_values or study.form_rationale_only,
            "posted": posted or {},
        }
        return context

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        context = self._context(study)
        if not context["pair_missing"]:
            study_preview_mark(study=study)
        return render(request, "annotation/study_preview.html", context)

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        posted = parse_judgment_post(request, study=study)
        context = self._context(study, posted)
        if context["pair_missing"]:
            return render(request, "annotation/study_preview.html", context, status=400)
        try:
            judgment_preview_check(assignment=context["assignment"], **posted)
        except JudgmentInvalid as exc:
            context.update(error=exc.message, error_field=exc.field)
            return render(request, "annotation/study_preview.html", context, status=400)
        context["preview_accepted"] = True
        return render(request, "annotation/study_preview.html", context)
