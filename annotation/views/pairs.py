"""The researcher's pairs page: counts, the list of pairs with system names, and generation."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.forms.pairs import PairsGenerateForm
from annotation.models import Study
from annotation.selectors.pairs import (
    pair_counts_for_study,
    pair_list_for_study,
    user_may_generate_pairs,
)
from annotation.services.pairs_jobs import (
    pairs_generation_pending,
    pairs_generation_start,
    pairs_generation_state,
)
from core.broker import BrokerUnavailable

PAIRS_PER_PAGE = 50


class StudyPairsView(ResearcherRequiredMixin, View):
    """Researchers who are members of the study (with `annotation.add_pair`) and admins only;
    anyone else gets a 404. The page names systems, so it is never shown to workers."""

    def _study(self, request: HttpRequest, slug: str) -> Study:
        study = get_study_or_404(request, slug)
        if not user_may_generate_pairs(user=request.user, study=study):
            raise Http404("No such study.")
        return study

    def _render(
        self, request: HttpRequest, study: Study, form: PairsGenerateForm, status: int = 200
    ) -> HttpResponse:
        page = Paginator(pair_list_for_study(study=study), PAIRS_PER_PAGE).get_page(
            request.GET.get("page")
        )
        context: dict[str, Any] = {
            "study": study,
            "counts": pair_counts_for_study(study=study),
            "page": page,
            "form": form,
        }
        # The generation asked for (?generation=<id> after a click), else the one pending now.
        generation_id = request.GET.get("generation", "") or pairs_generation_pending(study=study)
        if generation_id:
            context["generation"] = pairs_generation_state(study=study, probe_id=generation_id)
            context["generation_status_url"] = reverse(
                "annotation:study_pairs_generation_status", args=[study.slug, generation_id]
            )
        return render(request, "annotation/study_pairs.html", context, status=status)

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = self._study(request, slug)
        return self._render(request, study, PairsGenerateForm(study=study))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = self._study(request, slug)
        form = PairsGenerateForm(request.POST, study=study)
        if not form.is_valid():
            return self._render(request, study, form, status=400)
        data = form.cleaned_data
        # Made by a worker, never in this request (130,500 pairs took two minutes): the page
        # polls its outcome. One generation per study is queued or running at a time.
        try:
            generation = pairs_generation_start(
                study=study,
                strategy=data["strategy"],
                baseline=data["baseline"],
                k=data["k"],
                turns=data["turns"],
                seed=data["seed"],
                gold=data["gold"],
            )
        except BrokerUnavailable as exc:
            messages.error(request, f"Pairs not queued: {exc}")
            return redirect("annotation:study_pairs", slug=study.slug)
        if not generation.queued:
            messages.info(
                request, "A generation of this study's pairs is already under way: nothing queued."
            )
        url = reverse("annotation:study_pairs", args=[study.slug])
        return redirect(f"{url}?generation={generation.id}")


class StudyPairsGenerationStatusView(StudyPairsView):
    """GET: the state of one pair generation of the study, as JSON, for the page's polling."""

    def get(self, request: HttpRequest, slug: str, generation_id: str = "") -> HttpResponse:
        study = self._study(request, slug)
        return JsonResponse(pairs_generation_state(study=study, probe_id=generation_id))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        raise Http404("No such page.")
