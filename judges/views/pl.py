"""PL training pages: start a training, watch it live, cancel or retry it.

Views parse, call one service or selector, and render; training runs on a worker, never here.
Only researchers who are members of the study, and admins, reach them; anyone else gets a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import Study
from core.broker import BrokerUnavailable
from judges.forms import PLTrainingForm
from judges.models import PLTraining
from judges.reward.plots import loss_curve_svg
from judges.reward.selectors import (
    pl_training_list_for_user,
    pl_training_queue_state,
    pl_training_status,
)
from judges.reward.services import (
    TrainingRequest,
    pl_training_cancel,
    pl_training_retry,
    pl_training_start,
)

METRIC_ROWS = (
    ("ndcg@2", "NDCG@2"),
    ("ndcg@3", "NDCG@3"),
    ("ndcg@5", "NDCG@5"),
    ("first_vs_second", "1st vs 2nd accuracy"),
    ("first_vs_last", "1st vs last accuracy"),
    ("pair_accuracy", "Human pair accuracy"),
    ("lists", "Lists"),
    ("pairs", "Human pairs"),
)


def _training_or_404(request: HttpRequest, study: Study, training_id: int) -> PLTraining:
    training = pl_training_list_for_user(user=request.user).filter(pk=training_id).first()
    if training is None or training.study_id != study.pk:
        raise Http404("No such training.")
    return training


class PLTrainingListView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return self._render(request, study, PLTrainingForm())

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        form = PLTrainingForm(request.POST)
        if not form.is_valid():
            return self._render(request, study, form, status=400)
        data = form.cleaned_data
        training_request = TrainingRequest(
            name=data["name"],
            recipe=data["recipe"],
            k=data["k"],
            sources=tuple(data["sources"]),
            ties=data["ties"],
            likert_weights=data["likert_weights"],
            mode=data["mode"],
            checkpoint=data["checkpoint"],
            epochs=data["epochs"],
            learning_rate=data["learning_rate"],
            holdout=data["holdout"],
            seed=data["seed"],
        )
        try:
            training = pl_training_start(
                study=study,
                user=request.user,  # type: ignore[arg-type]
                request=training_request,
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    if field in form.fields:
                        form.add_error(field, error)
                    else:
                        form.add_error(None, error)
            return self._render(request, study, form, status=400)
        except (BrokerUnavailable, PermissionDenied) as exc:
            messages.error(request, str(exc))
            return self._render(request, study, form, status=409)
        messages.success(request, f"Training {training.pk} queued for the reward_model workers.")
        return redirect("judges:pl_training_detail", slug=study.slug, training_id=training.pk)

    def _render(
        self, request: HttpRequest, study: Study, form: PLTrainingForm, status: int = 200
    ) -> HttpResponse:
        trainings = pl_training_list_for_user(user=request.user).filter(study=study)
        context = {"study": study, "trainings": trainings, "form": form}
        return render(request, "judges/pl_training_list.html", context, status=status)


class PLTrainingDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, training_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        training = _training_or_404(request, study, training_id)
        rows = [
            (
                label,
                training.metrics.get("held_out", {}).get(key),
                training.metrics.get("train", {}).get(key),
            )
            for key, label in METRIC_ROWS
        ]
        context = {
            "study": study,
            "training": training,
            "metric_rows": rows,
            "queue_state": pl_training_queue_state(training=training),
        }
        return render(request, "judges/pl_training_detail.html", context)


class PLTrainingStatusView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, training_id: int) -> JsonResponse:
        study = get_study_or_404(request, slug)
        training = _training_or_404(request, study, training_id)
        return JsonResponse(pl_training_status(training=training))


class PLTrainingCurveView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, training_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        training = _training_or_404(request, study, training_id)
        svg = loss_curve_svg(training.curve, title=f"Loss of training {training.pk}")
        response = HttpResponse(svg, content_type="image/svg+xml")
        response["Cache-Control"] = "no-store"
        return response


class PLTrainingCancelView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str, training_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        training = _training_or_404(request, study, training_id)
        try:
            pl_training_cancel(training=training, user=request.user)  # type: ignore[arg-type]
            messages.success(request, f"Training {training.pk} cancelled.")
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
        return redirect("judges:pl_training_detail", slug=study.slug, training_id=training.pk)


class PLTrainingRetryView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str, training_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        training = _training_or_404(request, study, training_id)
        try:
            pl_training_retry(training=training, user=request.user)  # type: ignore[arg-type]
            messages.success(request, f"Training {training.pk} queued again.")
        except (ValidationError, PermissionDenied, BrokerUnavailable) as exc:
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
        return redirect("judges:pl_training_detail", slug=study.slug, training_id=training.pk)
