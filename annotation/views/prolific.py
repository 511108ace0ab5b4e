"""The study's Prolific panel: connect the token, link or create the Prolific study, publish,
pause, resume and stop it. Views parse, call one service and render."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from annotation.access import ResearcherRequiredMixin
from annotation.forms.studies import ProlificConnectionForm, ProlificDraftForm
from annotation.models import Study
from annotation.prolific import ProlificError
from annotation.selectors.checklist import study_workers_needed
from annotation.services.prolific import (
    prolific_connection_test,
    prolific_connection_test_pending,
    prolific_connection_test_start,
    prolific_connection_test_state,
    prolific_study_link,
    prolific_token_clear,
    prolific_token_set,
    prolific_token_source,
)
from annotation.services.prolific_study import (
    TRANSITION_LABELS,
    prolific_draft_create,
    prolific_draft_payload,
    prolific_study_transition,
    prolific_transitions,
)
from annotation.views.launch import entry_link
from annotation.views.setup import study_for_config_or_404
from core.broker import BrokerUnavailable

TEMPLATE = "annotation/study_prolific.html"
DEFAULT_DESCRIPTION = (
    "You will read a question and two answers to it, side by side, and say which answer is "
    "better and by how much. Please read both answers in full."
)


def _draft_form(study: Study) -> ProlificDraftForm:
    return ProlificDraftForm(
        initial={
            "name": study.name,
            "description": study.description or DEFAULT_DESCRIPTION,
            "places": max(1, study_workers_needed(study=study)),
        }
    )


def _panel(
    request: HttpRequest,
    study: Study,
    *,
    form: ProlificConnectionForm | None = None,
    draft_form: ProlificDraftForm | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The panel: connection form, then the draft to create or the transitions offered."""
    draft_form = draft_form or _draft_form(study)
    places = draft_form["places"].value()
    try:
        places_shown = int(places or 0)
    except (TypeError, ValueError):
        places_shown = 0
    context: dict[str, Any] = {
        "study": study,
        "form": form
        or ProlificConnectionForm(initial={"prolific_study_id": study.prolific_study_id}),
        "token_source": prolific_token_source(study=study),
        "draft_form": draft_form,
        "draft_error": error,
        "transitions": [
            (action, TRANSITION_LABELS[action]) for action in prolific_transitions(study=study)
        ],
    }
    # The connection test asked for (?test=<id> after a click), else the one pending now.
    test_id = request.GET.get("test", "") or prolific_connection_test_pending(study=study)
    if test_id:
        context["test"] = prolific_connection_test_state(study=study, probe_id=test_id)
        context["test_status_url"] = reverse(
            "annotation:study_prolific_test_status", args=[study.slug, test_id]
        )
    if study.prolific_token_encrypted and not study.prolific_study_id:
        context["draft_preview"] = prolific_draft_payload(
            study=study,
            key=study.prolific_draft_key or "…",
            entry_url=entry_link(request, study),
            name=str(draft_form["name"].value() or ""),
            description=str(draft_form["description"].value() or ""),
            places=places_shown,
        )
    return render(request, TEMPLATE, context, status=status)


class StudyProlificView(ResearcherRequiredMixin, View):
    """Connect the study to Prolific: paste the API token, link the Prolific study, test."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        return _panel(request, study_for_config_or_404(request, slug))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        action = request.POST.get("action", "save")
        if action == "clear":
            prolific_token_clear(study=study)
            messages.success(request, "The Prolific token is forgotten; entry is unverified.")
            return redirect("annotation:study_prolific", slug=study.slug)
        form = ProlificConnectionForm(request.POST)
        if not form.is_valid():
            return _panel(request, study, form=form, status=400)
        try:
            if form.cleaned_data["token"]:
                prolific_token_set(study=study, token=form.cleaned_data["token"])
            wanted = form.cleaned_data["prolific_study_id"]
            if action == "test":
                # Made by a worker, never in this request: the page polls its answer.
                return _test_queued(request, study, wanted)
            if not wanted or wanted == study.prolific_study_id:
                found = prolific_connection_test(study=study, prolific_study_id=wanted)
            else:
                found = prolific_study_link(study=study, prolific_study_id=wanted)
        except (ProlificError, ValueError) as exc:
            form.add_error(None, getattr(exc, "message", str(exc)))
            return _panel(request, study, form=form, status=400)
        messages.success(
            request,
            f"Connected to Prolific: study {found.name!r} ({found.id}), {found.status}, "
            f"{found.places} places ({found.places_taken} taken).",
        )
        return redirect("annotation:study_prolific", slug=study.slug)


def _test_queued(request: HttpRequest, study: Study, wanted: str) -> HttpResponse:
    """Queue the study's Prolific test (or find the pending one) and show the panel polling it."""
    try:
        probe = prolific_connection_test_start(study=study, prolific_study_id=wanted)
    except BrokerUnavailable as exc:
        messages.error(request, f"Connection test not queued: {exc}")
        return redirect("annotation:study_prolific", slug=study.slug)
    if not probe.queued:
        messages.info(
            request, "A test of this connection is already under way: nothing more queued."
        )
    url = reverse("annotation:study_prolific", args=[study.slug])
    return redirect(f"{url}?test={probe.id}")


class StudyProlificTestStatusView(ResearcherRequiredMixin, View):
    """GET: the state of one Prolific connection test of the study, as JSON, for the page."""

    def get(self, request: HttpRequest, slug: str, test_id: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        return JsonResponse(prolific_connection_test_state(study=study, probe_id=test_id))


class StudyProlificDraftView(ResearcherRequiredMixin, View):
    """POST: create the study on Prolific as a draft (at most once) and link it."""

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        form = ProlificDraftForm(request.POST)
        if not form.is_valid():
            return _panel(request, study, draft_form=form, status=400)
        try:
            outcome = prolific_draft_create(
                study=study,
                entry_url_for=lambda linked: entry_link(request, linked),
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                places=form.cleaned_data["places"],
            )
        except ProlificError as exc:
            study.refresh_from_db()
            return _panel(request, study, draft_form=form, error=exc.message, status=400)
        messages.success(
            request,
            f"Draft {'created' if outcome.created else 'found'} on Prolific and linked: study "
            f"{outcome.study.id} ({outcome.study.status or 'UNPUBLISHED'}). Check it on "
            "Prolific, then publish it from here once the study is live in Concord.",
        )
        return redirect("annotation:study_prolific", slug=study.slug)


class StudyProlificTransitionView(ResearcherRequiredMixin, View):
    """POST one transition of the linked Prolific study: PUBLISH, PAUSE, START or STOP."""

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        action = request.POST.get("action", "")
        try:
            moved = prolific_study_transition(
                study=study,
                action=action,
                entry_url_for=lambda linked: entry_link(request, linked),
            )
        except ProlificError as exc:
            messages.error(request, f"Not done: {exc.message}")
        else:
            messages.success(
                request,
                f"{TRANSITION_LABELS[action]}: done. Prolific's study {moved.id or ''} is now "
                f"{study.prolific_study_status}.",
            )
        return redirect("annotation:study_prolific", slug=study.slug)
