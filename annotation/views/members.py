"""The study's members page: who may open it, with their role; add and remove by name."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin
from annotation.forms.studies import MemberAddForm
from annotation.models import Study
from annotation.selectors.studies import study_member_list
from annotation.services.roles import study_member_add_by_name, study_member_remove
from annotation.views.setup import study_for_config_or_404
from core.forms import form_errors_to


class StudyMembersView(ResearcherRequiredMixin, View):
    template_name = "annotation/study_members.html"

    def _render(
        self, request: HttpRequest, study: Study, form: MemberAddForm, status: int = 200
    ) -> HttpResponse:
        context = {"study": study, "members": study_member_list(study=study), "form": form}
        return render(request, self.template_name, context, status=status)

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        return self._render(request, study, MemberAddForm())

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        form = MemberAddForm(request.POST)
        if form.is_valid():
            try:
                membership = study_member_add_by_name(
                    study=study, identifier=form.cleaned_data["identifier"]
                )
            except ValidationError as exc:
                form_errors_to(form, exc)
            else:
                messages.success(request, f"{membership.user.username} is now a member.")
                return redirect("annotation:study_members", slug=study.slug)
        return self._render(request, study, form, status=400)


class StudyMemberRemoveView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
        study = study_for_config_or_404(request, slug)
        user = User.objects.filter(pk=user_id, study_memberships__study=study).first()
        if user is None:
            raise Http404("No such member.")
        try:
            study_member_remove(study=study, user=user)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"{user.username} is no longer a member.")
        return redirect("annotation:study_members", slug=study.slug)
