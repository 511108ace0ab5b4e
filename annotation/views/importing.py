"""The researcher's import page and flagged-answer review. Views parse, call, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.forms.importing import LeakRemedyForm, StudyImportForm
from annotation.models import Answer, Study
from annotation.selectors.importing import (
    answer_get_flagged,
    answer_list_flagged,
    study_get_for_import,
)
from annotation.services.importing import ImportResult, StudyImportError, study_import
from annotation.services.leaks import LeakRemedyError, answer_leak_clear, answer_leak_remedy

FLAGGED_PER_PAGE = 100


def _study_for_import_or_404(request: HttpRequest, slug: str) -> Study:
    try:
        return study_get_for_import(user=request.user, slug=slug)
    except Study.DoesNotExist as exc:
        raise Http404("No such study.") from exc


class StudyImportView(ResearcherRequiredMixin, View):
    template_name = "annotation/study_import.html"

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = _study_for_import_or_404(request, slug)
        return render(request, self.template_name, {"study": study, "form": StudyImportForm()})

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = _study_for_import_or_404(request, slug)
        form = StudyImportForm(request.POST, request.FILES)
        context: dict[str, object] = {"study": study, "form": form}
        status = 200
        if form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                # The upload is read line by line from Django's temporary file, never whole.
                result: ImportResult = study_import(
                    study=study,
                    path_or_file=upload,
                    dry_run=form.cleaned_data["dry_run"],
                    add_systems=form.cleaned_data["add_systems"],
                )
            except StudyImportError as exc:
                context["import_error"] = exc
                status = 400
            else:
                context["result"] = result
                context["file_name"] = upload.name
        else:
            status = 400
        return render(request, self.template_name, context, status=status)


class FlaggedAnswerListView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        answers = answer_list_flagged(user=request.user, study=study)
        page = Paginator(answers, FLAGGED_PER_PAGE).get_page(request.GET.get("page"))
        return render(request, "annotation/flagged_answers.html", {"study": study, "page": page})


class FlaggedAnswerClearView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str, answer_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            answer = answer_get_flagged(user=request.user, study=study, answer_id=answer_id)
        except Answer.DoesNotExist as exc:
            raise Http404("No such flagged answer.") from exc
        if not isinstance(request.user, User):
            raise Http404("No such flagged answer.")
        answer_leak_clear(answer=answer, user=request.user)
        messages.success(
            request, f"Cleared the answer by {answer.system} to prompt {answer.prompt}."
        )
        return redirect("annotation:flagged_answers", slug=study.slug)


class FlaggedAnswerRemedyView(ResearcherRequiredMixin, View):
    """Leave a flagged answer out of pairs, edit it, keep it with a note, or clear it."""

    def post(self, request: HttpRequest, slug: str, answer_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            answer = answer_get_flagged(user=request.user, study=study, answer_id=answer_id)
        except Answer.DoesNotExist as exc:
            raise Http404("No such flagged answer.") from exc
        if not isinstance(request.user, User):
            raise Http404("No such flagged answer.")
        form = LeakRemedyForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Choose a remedy.")
            return redirect("annotation:flagged_answers", slug=study.slug)
        remedy = form.cleaned_data["remedy"]
        try:
            answer_leak_remedy(
                answer=answer,
                user=request.user,
                remedy=remedy,
                note=form.cleaned_data["note"],
                edited_turns=request.POST.getlist("turn") if remedy == "edited" else None,
            )
        except LeakRemedyError as exc:
            messages.error(request, str(exc))
        else:
            label = Answer.LeakRemedy(remedy).label
            messages.success(request, f"{answer.system} on prompt {answer.prompt}: {label}.")
        return redirect("annotation:flagged_answers", slug=study.slug)
