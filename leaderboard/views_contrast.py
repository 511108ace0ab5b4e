"""The study's contrast set page: build it in a worker and poll the outcome."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import ContrastSet, Study
from core.broker import BrokerUnavailable
from leaderboard.forms import ContrastBuildForm
from leaderboard.services.contrast_jobs import (
    contrast_build_options,
    contrast_build_pending,
    contrast_build_start,
    contrast_build_state,
)


def _page(
    request: HttpRequest, study: Study, form: ContrastBuildForm, status: int = 200
) -> HttpResponse:
    context: dict[str, object] = {
        "study": study,
        "form": form,
        "contrast_sets": ContrastSet.objects.filter(study=study)
        .select_related("system")
        .order_by("seed"),
    }
    build_id = request.GET.get("build", "") or contrast_build_pending(study=study)
    if build_id:
        build = contrast_build_state(study=study, probe_id=build_id)
        context["build"] = build
        context["build_options"] = build.get("options") or contrast_build_options(
            study=study, probe_id=build_id
        )
        context["build_status_url"] = reverse(
            "leaderboard:study_contrast_status", args=[study.slug, build_id]
        )
    return render(request, "leaderboard/study_contrast.html", context, status=status)


class StudyContrastView(ResearcherRequiredMixin, View):
    """Researchers who may read the study and admins only; anyone else gets a 404."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return _page(request, study, ContrastBuildForm(study=study))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        form = ContrastBuildForm(request.POST, study=study)
        if not form.is_valid():
            return _page(request, study, form, status=400)
        try:
            build = contrast_build_start(study=study, options=form.options())
        except BrokerUnavailable as exc:
            messages.error(request, f"Contrast set build not queued: {exc}")
            return redirect("leaderboard:study_contrast", slug=study.slug)
        if not build.queued:
            messages.info(
                request, "A contrast set build of this study is already under way: nothing queued."
            )
        url = reverse("leaderboard:study_contrast", args=[study.slug])
        return redirect(f"{url}?build={build.id}")


class StudyContrastStatusView(ResearcherRequiredMixin, View):
    """GET: the state of one contrast set build of the study, as JSON, for the page's polling."""

    def get(self, request: HttpRequest, slug: str, build_id: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return JsonResponse(contrast_build_state(study=study, probe_id=build_id))
