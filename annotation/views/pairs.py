"""The researcher's pairs page: counts, the list of pairs with system names, and generation."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.forms.pairs import PairsGenerateForm
from annotation.models import Study
from annotation.selectors.pairs import (
    pair_counts_for_study,
    pair_list_for_study,
    user_may_generate_pairs,
)
from annotation.services.pairs import (
    PairsGenerationError,
    PairsResult,
    gold_pairs_generate,
    pairs_generate,
)

PAIRS_PER_PAGE = 50


def _result_line(what: str, result: PairsResult) -> str:
    line = (
        f"{what}: {result.created} created, {result.already_present} already present, "
        f"{result.skipped_answers} flagged answers left out"
    )
    if result.marked_gold:
        line += f", {result.marked_gold} existing pairs marked gold"
    if result.prompts_without_baseline:
        line += f", {result.prompts_without_baseline} prompts without a baseline answer"
    return line + "."


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
        try:
            if data["strategy"]:
                result = pairs_generate(
                    study=study,
                    strategy=data["strategy"],
                    baseline_system=data["baseline"],
                    k=data["k"],
                    turns=data["turns"],
                    seed=data["seed"],
                )
                messages.success(request, _result_line(f"{data['strategy']} pairs", result))
            if data["gold"]:
                gold = gold_pairs_generate(study=study, kind=data["gold"], seed=data["seed"])
                messages.success(request, _result_line(f"Gold pairs ({data['gold']})", gold))
        except PairsGenerationError as exc:
            messages.error(request, str(exc))
        return redirect("annotation:study_pairs", slug=study.slug)
