"""The researcher's pages to create and configure a study. Views parse, call, render."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.forms.studies import StudyCreateForm, StudySettingsForm
from annotation.models import Study
from annotation.rendering import markdown_render_safe
from annotation.selectors.studies import user_may_configure_study
from annotation.services.studies import (
    SETTINGS_FIELDS,
    studies_status_set,
    study_create,
    study_settings_update,
)
from core.forms import form_errors_to


def study_for_config_or_404(request: HttpRequest, slug: str) -> Study:
    """The study, if the user is a member with `annotation.change_study` (or an admin)."""
    study = get_study_or_404(request, slug)
    if not user_may_configure_study(user=request.user, study=study):
        raise Http404("No such study.")
    return study


class StudyCreateView(ResearcherRequiredMixin, View):
    template_name = "annotation/study_new.html"

    def _user(self, request: HttpRequest) -> User:
        if not isinstance(request.user, User) or not request.user.has_perm("annotation.add_study"):
            raise Http404("No such page.")
        return request.user

    def get(self, request: HttpRequest) -> HttpResponse:
        self._user(request)
        return render(request, self.template_name, {"form": StudyCreateForm()})

    def post(self, request: HttpRequest) -> HttpResponse:
        user = self._user(request)
        form = StudyCreateForm(request.POST)
        if form.is_valid():
            try:
                study = study_create(
                    name=form.cleaned_data["name"], slug=form.cleaned_data["slug"], user=user
                )
            except ValidationError as exc:
                form_errors_to(form, exc)
            else:
                messages.success(request, f"Study {study.name} created as a draft.")
                return redirect("annotation:study_settings", slug=study.slug)
        return render(request, self.template_name, {"form": form}, status=400)


class StudySettingsView(ResearcherRequiredMixin, View):
    """Every setting; "Preview instructions" renders them as workers will see them, unsaved."""

    template_name = "annotation/study_settings.html"

    def _render(
        self, request: HttpRequest, study: Study, form: StudySettingsForm, **extra: Any
    ) -> HttpResponse:
        status = extra.pop("status", 200)
        context = {"study": study, "form": form, **extra}
        return render(request, self.template_name, context, status=status)

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        return self._render(request, study, StudySettingsForm(instance=study))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        form = StudySettingsForm(request.POST, instance=Study.objects.get(pk=study.pk))
        if "preview" in request.POST:
            # The same renderer and sanitiser as the worker's consent page.
            preview = markdown_render_safe(request.POST.get("instructions", ""))
            return self._render(request, study, form, instructions_preview=preview)
        if not form.is_valid():
            return self._render(request, study, form, status=400)
        values = {name: form.cleaned_data[name] for name in SETTINGS_FIELDS}
        try:
            study = study_settings_update(study=study, values=values)
        except ValidationError as exc:
            form_errors_to(form, exc)
            return self._render(request, study, form, status=400)
        messages.success(request, "Settings saved.")
        return redirect("annotation:study_settings", slug=study.slug)


class StudyStatusView(ResearcherRequiredMixin, View):
    """Pause, resume or close a study (launching goes through the checklist)."""

    MOVES = {
        "pause": Study.Status.PAUSED,
        "resume": Study.Status.LIVE,
        "close": Study.Status.CLOSED,
    }

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        target = self.MOVES.get(request.POST.get("move", ""))
        if target is None:
            messages.error(request, "Choose pause, resume or close.")
        elif target == Study.Status.LIVE and study.status != Study.Status.PAUSED:
            messages.error(request, "Launch a draft from its checklist.")
        elif studies_status_set(studies=Study.objects.filter(pk=study.pk), status=target):
            messages.success(request, f"The study is now {target.label.lower()}.")
        else:
            messages.error(
                request,
                f"A {study.get_status_display().lower()} study cannot become "
                f"{target.label.lower()}.",
            )
        return redirect("annotation:study_detail", slug=study.slug)
