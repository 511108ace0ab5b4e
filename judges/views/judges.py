"""The researcher's judge pages: connect an LLM judge from a template, set its key, test it.

Doors only: parse, call one service or selector, render. Members of the study (with the judge
permissions) and admins only; a pasted key never comes back in a page, a message or a log.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.debug import sensitive_post_parameters

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import Pair, Study
from core.broker import BrokerUnavailable
from core.forms import form_errors_to
from judges.forms import JudgeCreateForm, JudgeKeyForm, JudgeTemplateForm, PanelCreateForm
from judges.models import Judge
from judges.selectors.judges import (
    judge_get_for_study,
    template_preview_pair,
    template_preview_pairs,
)
from judges.services.connection import (
    judge_connection_test_pending,
    judge_connection_test_start,
    judge_connection_test_state,
)
from judges.services.judges import judge_create, judge_readiness
from judges.services.keys import judge_api_key_set, judge_key_source
from judges.services.panels import panel_create
from judges.services.templates import (
    TemplateDraft,
    judge_draft,
    judge_template_preview,
    judge_templates_copy,
    judge_templates_update,
    reply_check,
    template_draft_check,
)


def _study_for(request: HttpRequest, slug: str, perm: str) -> Study:
    study = get_study_or_404(request, slug)
    if not request.user.has_perm(perm):
        raise Http404("No such page.")
    return study


def _judge_or_404(study: Study, judge_id: int) -> Judge:
    try:
        return judge_get_for_study(study=study, judge_id=judge_id)
    except Judge.DoesNotExist as exc:
        raise Http404("No such judge.") from exc


@method_decorator(sensitive_post_parameters("api_key"), name="post")
class JudgeCreateView(ResearcherRequiredMixin, View):
    template_name = "judges/judge_new.html"

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = _study_for(request, slug, "judges.add_judge")
        return render(request, self.template_name, {"study": study, "form": JudgeCreateForm()})

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = _study_for(request, slug, "judges.add_judge")
        form = JudgeCreateForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            pasted = data["key_source"] == JudgeCreateForm.KEY_PASTED
            try:
                judge = judge_create(
                    name=data["name"],
                    kind=Judge.Kind.LLM,
                    model_name=data["model_name"],
                    base_url=data["base_url"],
                    api_key_env="" if pasted else data["api_key_env"],
                    api_key=data["api_key"] if pasted else "",
                    template_name=data["template"],
                    price_input_per_mtok=data["price_input_per_mtok"],
                    price_output_per_mtok=data["price_output_per_mtok"],
                    requests_per_minute=data["requests_per_minute"],
                    order_policy=data["order_policy"],
                    turns=data["turns"],
                    multi_turn=data["multi_turn"],
                    study=study,
                )
            except ValidationError as exc:
                form_errors_to(form, exc)
            else:
                messages.success(request, f"Judge {judge.name} created. Test its connection.")
                return redirect("judges:judge_detail", slug=study.slug, judge_id=judge.pk)
        context = {"study": study, "form": form}
        return render(request, self.template_name, context, status=400)


class PanelCreateView(ResearcherRequiredMixin, View):
    """Make a panel (jury) of the study's judges; it runs on their done runs."""

    template_name = "judges/panel_new.html"

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = _study_for(request, slug, "judges.add_judge")
        form = PanelCreateForm(study=study)
        return render(request, self.template_name, {"study": study, "form": form})

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = _study_for(request, slug, "judges.add_judge")
        form = PanelCreateForm(request.POST, study=study)
        if form.is_valid():
            data = form.cleaned_data
            try:
                panel = panel_create(
                    name=data["name"],
                    study=study,
                    members=data["members"],
                    rule=data["rule"],
                    weights=data["weight_list"],
                )
            except ValidationError as exc:
                form_errors_to(form, exc)
            else:
                messages.success(
                    request, f"Panel {panel.name} created. Start a run to combine its members."
                )
                return redirect("judges:judge_detail", slug=study.slug, judge_id=panel.pk)
        context = {"study": study, "form": form}
        return render(request, self.template_name, context, status=400)


class JudgeDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, judge_id: int) -> HttpResponse:
        study = _study_for(request, slug, "judges.view_judge")
        judge = _judge_or_404(study, judge_id)
        context: dict[str, Any] = {
            "study": study,
            "judge": judge,
            "readiness": judge_readiness(judge=judge),
            "key_source": judge_key_source(judge=judge),
            "key_form": JudgeKeyForm(),
            "editable": judge.study_id == study.pk and request.user.has_perm("judges.change_judge"),
            "panel_members": judge.panel_members.select_related("member").order_by(
                "position", "member_id"
            ),
        }
        # The test asked for (?test=<id> after a click), else the one pending now.
        test_id = request.GET.get("test", "") or judge_connection_test_pending(judge=judge)
        if test_id and judge.kind == Judge.Kind.LLM:
            context["test"] = judge_connection_test_state(judge=judge, probe_id=test_id)
            context["test_status_url"] = reverse(
                "judges:judge_test_status", args=[study.slug, judge.pk, test_id]
            )
        return render(request, "judges/judge_detail.html", context)


class JudgeTestView(ResearcherRequiredMixin, View):
    """Queue one tiny call to the judge's API for a worker (or find the one already queued);
    the judge's page then polls its answer."""

    def post(self, request: HttpRequest, slug: str, judge_id: int) -> HttpResponse:
        study = _study_for(request, slug, "judges.view_judge")
        judge = _judge_or_404(study, judge_id)
        if judge.kind != Judge.Kind.LLM:
            messages.error(request, f"{judge.get_kind_display()} judges make no API calls.")
            return redirect("judges:judge_detail", slug=study.slug, judge_id=judge.pk)
        try:
            probe = judge_connection_test_start(judge=judge)
        except BrokerUnavailable as exc:
            messages.error(request, f"Connection test not queued: {exc}")
            return redirect("judges:judge_detail", slug=study.slug, judge_id=judge.pk)
        if not probe.queued:
            messages.info(
                request, "A test of this connection is already under way: nothing more queued."
            )
        url = reverse("judges:judge_detail", args=[study.slug, judge.pk])
        return redirect(f"{url}?test={probe.id}")


class JudgeTestStatusView(ResearcherRequiredMixin, View):
    """GET: the state of one connection test of the judge, as JSON, for the page to poll."""

    def get(self, request: HttpRequest, slug: str, judge_id: int, test_id: str) -> HttpResponse:
        study = _study_for(request, slug, "judges.view_judge")
        judge = _judge_or_404(study, judge_id)
        return JsonResponse(judge_connection_test_state(judge=judge, probe_id=test_id))


@method_decorator(sensitive_post_parameters("api_key"), name="post")
class JudgeKeyView(ResearcherRequiredMixin, View):
    """Replace the key of one of the study's own judges with a pasted one."""

    def post(self, request: HttpRequest, slug: str, judge_id: int) -> HttpResponse:
        study = _study_for(request, slug, "judges.change_judge")
        judge = _judge_or_404(study, judge_id)
        if judge.study_id != study.pk:
            raise Http404("No such judge.")  # an admin's shared judge is changed in the admin
        form = JudgeKeyForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Paste the new key.")
        else:
            try:
                judge_api_key_set(judge=judge, key=form.cleaned_data["api_key"])
            except ValueError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, "Key replaced; it is stored encrypted.")
        return redirect("judges:judge_detail", slug=study.slug, judge_id=judge.pk)


class JudgeTemplateView(ResearcherRequiredMixin, View):
    """Edit an LLM judge's templates with a preview on one of the study's pairs and a check of
    the reply format on a sample reply; nothing here calls the judge's API.

    Any member who may see the judge previews; saving needs judges.change_judge (in place, while
    the judge has no run) or judges.add_judge (as a new judge), on the study's own judges only.
    """

    template_name = "judges/judge_templates.html"
    ACTIONS = ("preview", "save", "copy")

    def get(self, request: HttpRequest, slug: str, judge_id: int) -> HttpResponse:
        study, judge = self._study_and_judge(request, slug, judge_id)
        pair_id = request.GET.get("pair", "")
        pair = template_preview_pair(
            study=study, pair_id=int(pair_id) if pair_id.isdigit() else None
        )
        form = JudgeTemplateForm(
            initial={
                "prompt_template": judge.prompt_template,
                "reference_template": judge.reference_template,
                "multi_turn_template": judge.multi_turn_template,
                "output_format": judge.output_format,
                "pair": pair.pk if pair else None,
                "new_name": f"{judge.name} (edited)",
            },
            pairs=self._pairs(study, pair),
        )
        return self._render(request, study, judge, form, draft_judge=judge, pair=pair)

    def post(self, request: HttpRequest, slug: str, judge_id: int) -> HttpResponse:
        study, judge = self._study_and_judge(request, slug, judge_id)
        action = request.POST.get("action", "preview")
        if action not in self.ACTIONS:
            action = "preview"
        if action != "preview":
            perm = "judges.change_judge" if action == "save" else "judges.add_judge"
            if judge.study_id != study.pk or not request.user.has_perm(perm):
                raise Http404("No such page.")  # an admin's shared judge is changed in the admin
        pair_id = request.POST.get("pair", "")
        pair = template_preview_pair(
            study=study, pair_id=int(pair_id) if pair_id.isdigit() else None
        )
        form = JudgeTemplateForm(request.POST, pairs=self._pairs(study, pair))
        if not form.is_valid():
            return self._render(
                request, study, judge, form, draft_judge=None, pair=pair, status=400
            )
        data = form.cleaned_data
        draft = TemplateDraft(
            prompt_template=data["prompt_template"],
            reference_template=data["reference_template"],
            multi_turn_template=data["multi_turn_template"],
            output_format=data["output_format"],
        )
        sample = data["sample_reply"]  # read now: an error on a field takes it out of `data`
        try:
            if action == "save":
                saved = judge_templates_update(judge=judge, draft=draft)
            elif action == "copy":
                saved = judge_templates_copy(judge=judge, draft=draft, name=data["new_name"])
            else:
                template_draft_check(judge=judge, draft=draft)
        except ValidationError as exc:
            form_errors_to(form, exc)
        else:
            if action != "preview":
                messages.success(
                    request,
                    f"Templates of {saved.name} saved."
                    if action == "save"
                    else f"Judge {saved.name} created with the edited templates.",
                )
                url = reverse("judges:judge_templates", args=[study.slug, saved.pk])
                return redirect(f"{url}?pair={pair.pk}" if pair else url)
        status = 200 if action == "preview" or not form.errors else 400
        return self._render(
            request,
            study,
            judge,
            form,
            draft_judge=judge_draft(judge=judge, draft=draft),
            pair=pair,
            sample=sample,
            output_format=draft.output_format,
            status=status,
        )

    def _study_and_judge(
        self, request: HttpRequest, slug: str, judge_id: int
    ) -> tuple[Study, Judge]:
        study = _study_for(request, slug, "judges.view_judge")
        judge = _judge_or_404(study, judge_id)
        if judge.kind != Judge.Kind.LLM:
            raise Http404("Only an LLM judge has templates.")
        return study, judge

    def _pairs(self, study: Study, pair: Pair | None) -> list[Pair]:
        pairs = template_preview_pairs(study=study)
        if pair is not None and all(choice.pk != pair.pk for choice in pairs):
            pairs.insert(0, pair)
        return pairs

    def _render(
        self,
        request: HttpRequest,
        study: Study,
        judge: Judge,
        form: JudgeTemplateForm,
        *,
        draft_judge: Judge | None,
        pair: Pair | None,
        sample: str = "",
        output_format: str = "",
        status: int = 200,
    ) -> HttpResponse:
        runs = judge.runs.count()
        own = judge.study_id == study.pk
        context: dict[str, Any] = {
            "study": study,
            "judge": judge,
            "form": form,
            "pair": pair,
            "runs": runs,
            "may_save": own and not runs and request.user.has_perm("judges.change_judge"),
            "may_copy": own and request.user.has_perm("judges.add_judge"),
            "preview": (
                judge_template_preview(judge=draft_judge, study=study, pair=pair)
                if draft_judge is not None and pair is not None
                else None
            ),
            "check": reply_check(output_format=output_format, reply=sample) if sample else None,
        }
        return render(request, self.template_name, context, status=status)
