"""The study's references page: have a reference judge write the missing reference answers in a
worker, poll its progress, and read the reference ledger.

Researchers who may read the study and admins only (as for judge runs); anyone else gets a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from core.broker import BrokerUnavailable
from core.errors import ApplicationError
from judges.models import Judge
from judges.selectors.judges import judge_get_for_study, judge_list_for_study
from judges.selectors.references import reference_counts, reference_failures, reference_ledger
from judges.services.judges import judge_readiness
from judges.services.reference_jobs import (
    references_write_pending,
    references_write_start,
    references_write_state,
)


class StudyReferencesView(ResearcherRequiredMixin, View):
    template_name = "judges/references.html"

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        judges = [
            (judge, judge_readiness(judge=judge))
            for judge in judge_list_for_study(study=study).filter(kind=Judge.Kind.LLM)
        ]
        chosen = request.GET.get("judge", "")
        context: dict[str, object] = {
            "study": study,
            "judges": judges,
            "chosen": int(chosen) if chosen.isdigit() else None,
            "counts": reference_counts(study=study),
            "ledger": reference_ledger(study=study),
            "failures": reference_failures(study=study),
        }
        job_id = request.GET.get("job", "") or references_write_pending(study=study)
        if job_id:
            context["job"] = references_write_state(study=study, probe_id=job_id)
            context["job_status_url"] = reverse(
                "judges:study_references_status", args=[study.slug, job_id]
            )
        return render(request, self.template_name, context)

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        here = reverse("judges:study_references", args=[study.slug])
        judge_id = request.POST.get("judge", "")
        try:
            judge = judge_get_for_study(study=study, judge_id=int(judge_id))
        except (ValueError, Judge.DoesNotExist) as exc:
            raise Http404("No such judge.") from exc
        try:
            job = references_write_start(study=study, judge=judge, user=request.user)  # type: ignore[arg-type]
        except PermissionDenied as exc:
            raise Http404("No such page.") from exc
        except (ApplicationError, BrokerUnavailable) as exc:
            messages.error(request, f"References not queued: {exc}")
            return redirect(f"{here}?judge={judge.pk}")
        if not job.queued:
            messages.info(
                request, "References of this study are already being written: nothing queued."
            )
        return redirect(f"{here}?job={job.id}")


class StudyReferencesStatusView(ResearcherRequiredMixin, View):
    """GET: the state of one references job of the study, as JSON, for the page's polling."""

    def get(self, request: HttpRequest, slug: str, job_id: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return JsonResponse(references_write_state(study=study, probe_id=job_id))
