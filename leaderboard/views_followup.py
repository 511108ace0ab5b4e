"""The one action that turns two judges' disagreements into a follow-up rationale-only study.
Researchers who are members of the study, and admins; anyone else gets a 404."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views import View

from config.access import ResearcherRequiredMixin, get_study_or_404
from judges.models import JudgeRun
from leaderboard.forms import FollowupForm
from leaderboard.services.followup import followup_study_create


class StudyFollowupCreateView(ResearcherRequiredMixin, View):
    http_method_names = ["post"]

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        back = reverse("leaderboard:study_analysis", kwargs={"slug": study.slug}) + "#followup"
        form = FollowupForm(request.POST, study=study)
        if not form.is_valid():
            problems = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
            messages.error(request, f"No follow-up study was created ({problems}).")
            return redirect(back)
        data = form.cleaned_data
        runs = JudgeRun.objects.filter(study=study).select_related("judge").in_bulk()
        try:
            followup = followup_study_create(
                study=study,
                judge_a_run=runs[data["judge_a_run"]],
                judge_b_run=runs[data["judge_b_run"]],
                sample_size=data["sample_size"],
                seed=data["seed"],
                user=request.user,  # type: ignore[arg-type]
            )
        except ValidationError as exc:
            messages.error(request, f"No follow-up study was created: {' '.join(exc.messages)}")
            return redirect(back)
        messages.success(
            request,
            f"Created the draft study {followup.slug} with {followup.pairs.count()} pairs "
            "for the rationale-only form.",
        )
        return redirect("annotation:study_detail", slug=followup.slug)
