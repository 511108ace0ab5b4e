"""Judge run pages: start, watch, cancel and resume runs, and inspect every call.

Views parse, call one service or selector, and render. Only researchers who are members of the
study, and admins, reach them; anyone else gets a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import Study
from core.broker import BrokerUnavailable
from judges.forms import RunResumeForm, RunStartForm
from judges.kinds import RUNNABLE_KINDS, judge_kind
from judges.models import JudgeCall, JudgeRun
from judges.selectors.judges import judge_list_for_study
from judges.selectors.runs import (
    judge_call_get,
    judge_call_list,
    judge_run_get_for_user,
    judge_run_list_for_user,
    judge_run_progress,
    panel_member_calls,
)
from judges.services.judges import judge_readiness
from judges.services.limits import RunLimitReached
from judges.services.runs import (
    JudgeNotReady,
    judge_run_cancel,
    judge_run_health_check,
    judge_run_resume,
    judge_run_start,
)


def _run_or_404(request: HttpRequest, study: Study, run_id: int) -> JudgeRun:
    try:
        run = judge_run_get_for_user(user=request.user, run_id=run_id)
    except JudgeRun.DoesNotExist as exc:
        raise Http404("No such run.") from exc
    if run.study_id != study.pk:
        raise Http404("No such run.")
    return run


class RunListView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        return self._render(request, study, RunStartForm(study=study))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        form = RunStartForm(request.POST, study=study)
        if not form.is_valid():
            return self._render(request, study, form, status=400)
        try:
            run = judge_run_start(
                judge=form.cleaned_data["judge"],
                study=study,
                user=request.user,  # type: ignore[arg-type]
                budget_usd=form.cleaned_data["budget_usd"],
            )
        except (JudgeNotReady, BrokerUnavailable, PermissionDenied) as exc:
            messages.error(request, str(exc))
            return self._render(request, study, form, status=409)
        except RunLimitReached as exc:
            messages.error(request, "; ".join(exc.messages))
            return self._render(request, study, form, status=409)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
            return self._render(request, study, form, status=400)
        messages.success(request, judge_kind(run.judge.kind).queued(run))
        return redirect("judges:run_detail", slug=study.slug, run_id=run.pk)

    def _render(
        self, request: HttpRequest, study: Study, form: RunStartForm, status: int = 200
    ) -> HttpResponse:
        runs = judge_run_list_for_user(user=request.user).filter(study=study)
        judges = [
            (judge, judge_readiness(judge=judge))
            for judge in judge_list_for_study(study=study).filter(kind__in=RUNNABLE_KINDS)
        ]
        context = {"study": study, "runs": runs, "judges": judges, "form": form}
        return render(request, "judges/run_list.html", context, status=status)


class RunDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        run = judge_run_health_check(run=_run_or_404(request, study, run_id))
        status = request.GET.get("status", "")
        status = status if status in JudgeCall.Status.values else ""
        calls = judge_call_list(run=run, status=status)
        page = Paginator(calls, 50).get_page(request.GET.get("page"))
        context = {
            "study": study,
            "run": run,
            "status_filter": status,
            "call_statuses": JudgeCall.Status.choices,
            "progress": judge_run_progress(run=run),
            "page": page,
            "resume_form": RunResumeForm(),
            "readiness": judge_readiness(judge=run.judge),
        }
        return render(request, "judges/run_detail.html", context)


class RunProgressView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, run_id: int) -> JsonResponse:
        study = get_study_or_404(request, slug)
        run = judge_run_health_check(run=_run_or_404(request, study, run_id))
        return JsonResponse(judge_run_progress(run=run).as_json())


class RunCancelView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        run = _run_or_404(request, study, run_id)
        try:
            judge_run_cancel(run=run, user=request.user)  # type: ignore[arg-type]
            messages.success(request, f"Run {run.pk} cancelled; calls in flight still finish.")
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
        return redirect("judges:run_detail", slug=study.slug, run_id=run.pk)


class RunResumeView(ResearcherRequiredMixin, View):
    def post(self, request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        run = _run_or_404(request, study, run_id)
        form = RunResumeForm(request.POST)
        if not form.is_valid():
            messages.error(
                request, "; ".join(str(e) for errs in form.errors.values() for e in errs)
            )
            return redirect("judges:run_detail", slug=study.slug, run_id=run.pk)
        try:
            judge_run_resume(
                run=run,
                user=request.user,  # type: ignore[arg-type]
                budget_usd=form.cleaned_data["budget_usd"],
            )
            messages.success(request, f"Run {run.pk} resumed.")
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
        except (JudgeNotReady, BrokerUnavailable, PermissionDenied) as exc:
            messages.error(request, str(exc))
        return redirect("judges:run_detail", slug=study.slug, run_id=run.pk)


class CallDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, run_id: int, call_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        run = _run_or_404(request, study, run_id)
        try:
            call = judge_call_get(run=run, call_id=call_id)
        except run.calls.model.DoesNotExist as exc:
            raise Http404("No such call.") from exc
        context = {
            "study": study,
            "run": run,
            "call": call,
            "messages_sent": call.request.get("messages", []),
            "member_calls": panel_member_calls(call=call),
        }
        return render(request, "judges/call_detail.html", context)
