"""The one action that turns two judges' disagreements into a follow-up rationale-only study, and
the count of those disagreements that a researcher reads before creating it. Researchers who are
members of the study, and admins; anyone else gets a 404."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import Study
from judges.models import JudgeRun
from leaderboard.forms import FollowupForm
from leaderboard.selectors.followup import judge_disagreement_counts
from leaderboard.services.followup import followup_study_create


def _back(study: Study) -> str:
    return reverse("leaderboard:study_analysis", kwargs={"slug": study.slug}) + "#followup"


def _problems(form: FollowupForm) -> str:
    return "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())


def _parsed(
    request: HttpRequest, study: Study, nothing: str
) -> tuple[FollowupForm, dict[str, Any], JudgeRun, JudgeRun] | HttpResponse:
    """The posted form, its data and its two runs; or, with a message saying `nothing` and
    why, the way back to the analysis page."""
    form = FollowupForm(request.POST, study=study)
    if not form.is_valid():
        messages.error(request, f"{nothing} ({_problems(form)}).")
        return redirect(_back(study))
    data = form.cleaned_data
    runs = JudgeRun.objects.filter(study=study).select_related("judge").in_bulk()
    return form, data, runs[data["judge_a_run"]], runs[data["judge_b_run"]]


class StudyFollowupPreviewView(ResearcherRequiredMixin, View):
    """The disagreements of the two runs chosen, counted by which run voted the better side,
    beside the form filled in as asked, ready to create the follow-up. A POST (the create
    form's other button, with its CSRF token) that writes nothing."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        parsed = _parsed(request, study, "Nothing was counted")
        if isinstance(parsed, HttpResponse):
            return parsed
        form, data, first, second = parsed
        counts = judge_disagreement_counts(study=study, judge_a_run=first, judge_b_run=second)
        available = counts.total if data["agreeing"] == "any" else counts.agreed[data["agreeing"]]
        context = {
            "study": study,
            "followup_form": form,
            "counts": counts,
            "available": available,
            "sampled": min(available, data["sample_size"]),
        }
        return render(request, "leaderboard/followup_preview.html", context)


class StudyFollowupCreateView(ResearcherRequiredMixin, View):
    http_method_names = ["post"]

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        parsed = _parsed(request, study, "No follow-up study was created")
        if isinstance(parsed, HttpResponse):
            return parsed
        _, data, first, second = parsed
        try:
            followup = followup_study_create(
                study=study,
                judge_a_run=first,
                judge_b_run=second,
                agreeing=data["agreeing"],
                sample_size=data["sample_size"],
                seed=data["seed"],
                user=request.user,  # type: ignore[arg-type]
            )
        except ValidationError as exc:
            messages.error(request, f"No follow-up study was created: {' '.join(exc.messages)}")
            return redirect(_back(study))
        messages.success(
            request,
            f"Created the draft study {followup.slug} with {followup.pairs.count()} pairs "
            "for the rationale-only form.",
        )
        return redirect("annotation:study_detail", slug=followup.slug)
