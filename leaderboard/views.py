"""Analysis pages: the dashboard, its CSV tables, SVG plots and JSON report. Researchers who are
members of the study, and admins; anyone else gets a 404."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from annotation.access import ResearcherRequiredMixin, get_study_or_404
from annotation.models import Pair, Study
from core.broker import BrokerUnavailable
from leaderboard.forms import AnalysisFilterForm, FollowupForm, LabelPlanForm, ReportSettingsForm
from leaderboard.models import ExportJob
from leaderboard.report import label_budget
from leaderboard.report.base import HUMAN
from leaderboard.report.document import (
    Report,
    report_from_payload,
    report_plot,
    report_table,
    table_to_csv,
)
from leaderboard.report.html import report_page_context, report_to_html
from leaderboard.selectors.api import api_schema_get
from leaderboard.selectors.drilldown import unit_detail_get, unit_page_get
from leaderboard.selectors.exports import EXPORT_TABLES, export_job_get, export_jobs_for_study
from leaderboard.selectors.ratings import rated_pair_ids
from leaderboard.selectors.settings import (
    report_baseline_choices,
    report_params_for,
    report_settings_get,
)
from leaderboard.selectors.snapshots import study_data_fingerprint
from leaderboard.services.export_jobs import (
    export_job_file,
    export_job_request,
    export_needs_job,
    export_sync_max_rows,
)
from leaderboard.services.exports import CONTENT_TYPES, EXPORT_FORMATS, study_export_stream
from leaderboard.services.reports import (
    RECOMPUTE_AFTER_RUNNING,
    RECOMPUTE_ALREADY_QUEUED,
    RECOMPUTE_QUEUED,
    ReportState,
    report_recompute_request,
    report_state_get,
    report_to_json,
    snapshot_payload_required,
)
from leaderboard.services.settings import report_settings_update

RETRY_SECONDS = 3


def _state_for(request: HttpRequest, study: Study) -> tuple[AnalysisFilterForm, ReportState | None]:
    """The filter form and the report's state for its filters (None when they are not valid).
    Reads the snapshot and the study's fingerprint (once; the form's choices are cached under
    it), never the study's rows."""
    fingerprint = study_data_fingerprint(study=study)
    form = AnalysisFilterForm(request.GET, study=study, fingerprint=fingerprint)
    if not form.is_valid():
        return form, None
    return form, report_state_get(study=study, filters=form.filters(), fingerprint=fingerprint)


def _served(request: HttpRequest, study: Study) -> tuple[ReportState, Report] | HttpResponse:
    """The state and the stored report for a download, or the answer while there is none: 404
    for filters that are not valid, 503 with Retry-After while the first computation runs."""
    _form, state = _state_for(request, study)
    if state is None:
        raise Http404("The filters are not valid.")
    if state.payload is None:
        response = HttpResponse(
            "The report is being computed by the analysis worker; try again in a few seconds.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(RETRY_SECONDS)
        return response
    return state, report_from_payload(state.payload)


def _marked(response: HttpResponse, state: ReportState) -> HttpResponse:
    """Say in a header whether the served report is current or from older data."""
    response["X-Concord-Report"] = state.status
    return response


def _filename(study: Study, name: str, extension: str) -> str:
    return f"{study.slug}-{name}.{extension}"


RECOMPUTE_MESSAGES = {
    RECOMPUTE_QUEUED: "The report is being recomputed.",
    RECOMPUTE_ALREADY_QUEUED: (
        "A recomputation of this report is already queued: nothing more was queued."
    ),
    RECOMPUTE_AFTER_RUNNING: (
        "The report is being computed now; one more computation follows it, with your edits."
    ),
}


class StudyAnalysisView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        form, state = _state_for(request, study)
        context: dict[str, Any] = {
            "study": study,
            "form": form,
            "query": request.GET.urlencode(),
            "export_tables": sorted(EXPORT_TABLES),
            "export_formats": EXPORT_FORMATS,
            "export_sync_max_rows": export_sync_max_rows(),
        }
        if state is None:
            return render(request, "leaderboard/study_analysis.html", context, status=400)
        context |= {"state": state, "snapshot": state.snapshot, "retry_seconds": RETRY_SECONDS}
        if state.payload is not None:
            context |= report_page_context(report_from_payload(state.payload)) | {
                "csv_base": request.path + "tables/",
                "plot_base": request.path + "plots/",
                "followup_form": FollowupForm(study=study, fingerprint=form.fingerprint),
            }
        return _marked(render(request, "leaderboard/study_analysis.html", context), state)

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        """Recompute the report of the query's filters now (for rows edited in place)."""
        study = get_study_or_404(request, slug)
        form = AnalysisFilterForm(request.GET, study=study)
        if not form.is_valid():
            context = {"study": study, "form": form}
            return render(request, "leaderboard/study_analysis.html", context, status=400)
        outcome = report_recompute_request(study=study, filters=form.filters())
        messages.info(request, RECOMPUTE_MESSAGES[outcome])
        return redirect(f"{request.path}?{request.GET.urlencode()}")


class StudyReportSettingsView(ResearcherRequiredMixin, View):
    """The study's report settings (baseline, PL price): any researcher of the study may change
    them, as they may recompute the report."""

    def _render(
        self, request: HttpRequest, study: Study, form: ReportSettingsForm, status: int = 200
    ) -> HttpResponse:
        updated = report_settings_get(study=study)
        context = {"study": study, "form": form, "updated": updated}
        return render(request, "leaderboard/report_settings.html", context, status=status)

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        params = report_params_for(study=study)
        form = ReportSettingsForm(
            initial={"baseline": params.baseline, "pl_usd_per_1000": params.pl_usd_per_1000},
            systems=report_baseline_choices(study=study),
        )
        return self._render(request, study, form)

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        form = ReportSettingsForm(request.POST, systems=report_baseline_choices(study=study))
        if form.is_valid():
            try:
                report_settings_update(
                    study=study,
                    user=request.user,
                    baseline=form.cleaned_data["baseline"],
                    pl_usd_per_1000=form.cleaned_data["pl_usd_per_1000"],
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    for error in errors:
                        form.add_error(field, error)
            else:
                messages.info(request, "Report settings saved; the report is being recomputed.")
                return redirect("leaderboard:study_analysis", slug=study.slug)
        return self._render(request, study, form, status=400)


class StudyAnalysisTableView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, name: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        served = _served(request, study)
        if isinstance(served, HttpResponse):
            return served
        state, report = served
        table = report_table(report, name)
        if table is None:
            raise Http404("No such table.")
        response = HttpResponse(table_to_csv(table), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{_filename(study, name, "csv")}"'
        return _marked(response, state)


class StudyAnalysisPlotView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, name: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        served = _served(request, study)
        if isinstance(served, HttpResponse):
            return served
        state, report = served
        plot = report_plot(report, name)
        if plot is None:
            raise Http404("No such plot.")
        response = HttpResponse(plot.svg, content_type="image/svg+xml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{_filename(study, name, "svg")}"'
        return _marked(response, state)


class StudyAnalysisReportView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        served = _served(request, study)
        if isinstance(served, HttpResponse):
            return served
        state, _report = served
        payload = snapshot_payload_required(state.payload)
        response = HttpResponse(report_to_json(payload), content_type="application/json")
        response["Content-Disposition"] = (
            f'attachment; filename="{_filename(study, "agreement-report", "json")}"'
        )
        return _marked(response, state)


class StudyAnalysisReportHtmlView(ResearcherRequiredMixin, View):
    """The standalone HTML report of the page's filters, as a download (the file
    `agreement_report --format html` writes): styles and plots inline, no scripts."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        served = _served(request, study)
        if isinstance(served, HttpResponse):
            return served
        state, report = served
        response = HttpResponse(
            report_to_html(report, study=study), content_type="text/html; charset=utf-8"
        )
        response["Content-Disposition"] = (
            f'attachment; filename="{_filename(study, "agreement-report", "html")}"'
        )
        return _marked(response, state)


class StudyLabelPlanView(ResearcherRequiredMixin, View):
    """The label budget planner: "N more judgments, about $X at the study's pay, to reach ± Y
    points" for a judge, from the stored report of the page's filters (its `label_budget`
    section), with the projection's table and plot. Reads the snapshot, never the votes."""

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        filter_form, state = _state_for(request, study)
        context: dict[str, Any] = {"study": study, "filter_form": filter_form}
        if state is None:
            return render(request, "leaderboard/label_plan.html", context, status=400)
        context |= {"state": state, "retry_seconds": RETRY_SECONDS}
        if state.payload is None:
            return _marked(render(request, "leaderboard/label_plan.html", context), state)
        report = report_from_payload(state.payload)
        result = report.result(label_budget.SECTION)
        judges = [j for j in report.context.judges if j in result.judges]
        bound = request.GET if "judge" in request.GET else None
        form = LabelPlanForm(bound, judges=judges, initial={"judge": judges[0] if judges else ""})
        pay = study.pay_per_judgment_cents
        own = set(LabelPlanForm.base_fields)
        context |= {
            "form": form,
            # The analysis filters ride along in the planner's own form.
            "filter_items": [
                (key, value)
                for key, values in request.GET.lists()
                if key not in own
                for value in values
            ],
            "judges": judges,
            "result": result,
            "pay_cents": pay,
            "tables": label_budget.SECTION.tables(result, report.context),
            "plots": label_budget.SECTION.plots(result, report.context),
        }
        if bound is not None and form.is_valid():
            try:
                answer = label_budget.label_budget_plan(
                    result,
                    judge=form.cleaned_data["judge"],
                    target_half_width=form.cleaned_data["target_points"] / 100,
                    cents_per_judgment=pay,
                    prompts=form.cleaned_data["prompts"],
                )
            except ValueError as exc:
                form.add_error("prompts", str(exc))
            else:
                context |= {
                    "answer": answer,
                    "sentence": label_budget.plan_sentence(answer, cents_per_judgment=pay),
                }
        return _marked(render(request, "leaderboard/label_plan.html", context), state)


class StudyExportView(ResearcherRequiredMixin, View):
    """A small table's rows, built in the request; a big one sends the researcher to the
    background exports page with the table and format filled in."""

    def get(self, request: HttpRequest, slug: str, table: str, fmt: str) -> HttpResponseBase:
        study = get_study_or_404(request, slug)
        if table not in EXPORT_TABLES or fmt not in EXPORT_FORMATS:
            raise Http404("No such export.")
        if export_needs_job(study=study, kind=table):
            messages.info(
                request,
                f"The {table} table has more than {export_sync_max_rows():,} rows: "
                "build it in the background here.",
            )
            url = reverse("leaderboard:study_export_jobs", args=[study.slug])
            return redirect(f"{url}?{urlencode({'kind': table, 'format': fmt})}")
        response = StreamingHttpResponse(
            study_export_stream(study=study, table=table, fmt=fmt), content_type=CONTENT_TYPES[fmt]
        )
        response["Content-Disposition"] = f'attachment; filename="{_filename(study, table, fmt)}"'
        return response


class StudyExportJobListView(ResearcherRequiredMixin, View):
    """The study's background exports with their status, and a form to ask for one."""

    def _render(self, request: HttpRequest, study: Study, status: int = 200) -> HttpResponse:
        return render(
            request,
            "leaderboard/export_jobs.html",
            {
                "study": study,
                "jobs": export_jobs_for_study(study=study),
                "kinds": ExportJob.Kind.choices,
                "formats": ExportJob.Format.choices,
                "chosen_kind": request.GET.get("kind", ""),
                "chosen_format": request.GET.get("format", ""),
            },
            status=status,
        )

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        return self._render(request, get_study_or_404(request, slug))

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            job = export_job_request(
                study=study,
                user=request.user,  # type: ignore[arg-type]
                kind=request.POST.get("kind", ""),
                fmt=request.POST.get("format", ""),
            )
        except ValidationError as exc:
            for problems in exc.message_dict.values():
                for problem in problems:
                    messages.error(request, problem)
            return self._render(request, study, status=400)
        except BrokerUnavailable as exc:
            messages.error(request, str(exc))
            return self._render(request, study, status=503)
        messages.success(request, f"Export of {job.get_kind_display().lower()} queued.")
        return redirect("leaderboard:study_export_jobs", slug=study.slug)


class ExportJobDownloadView(ResearcherRequiredMixin, View):
    """Stream a finished export's file; 404 for anyone who may not read the study, and for a
    job that is not done."""

    def get(self, request: HttpRequest, slug: str, public_id: uuid.UUID) -> HttpResponseBase:
        study = get_study_or_404(request, slug)
        try:
            job = export_job_get(study=study, public_id=public_id)
            path = export_job_file(job=job)
        except (ExportJob.DoesNotExist, FileNotFoundError) as exc:
            raise Http404("No such export, or it is not ready.") from exc
        content_type = CONTENT_TYPES[job.format]
        return FileResponse(
            path.open("rb"),
            as_attachment=True,
            filename=_filename(study, job.kind, job.format),
            content_type=content_type,
        )


class ApiDocsView(ResearcherRequiredMixin, View):
    """The API's endpoints, read from its OpenAPI schema and listed as HTML (no scripts)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        schema = api_schema_get(request=request)
        return render(request, "leaderboard/api_docs.html", {"schema": schema})


class StudyUnitListView(ResearcherRequiredMixin, View):
    """The units behind a report cell: filters as on the dashboard, plus a judge and
    `disagree=1` for the units where that judge's vote differs from the people's majority, or
    `system`, `rating` and `level` for the units where a rater gave that system's answer that
    rating (the per-answer ratings section). Reads one page of the units stored with the
    report's snapshot of these filters, never the votes; while the first computation runs, the
    page says so and reloads."""

    page_size = 200

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        study = get_study_or_404(request, slug)
        form, state = _state_for(request, study)
        context: dict[str, Any] = {"study": study, "form": form, "rows": []}
        if state is None:
            return render(request, "leaderboard/unit_list.html", context, status=400)
        rated: dict[str, Any] | None = None
        system, rating, level = (request.GET.get(k, "") for k in ("system", "rating", "level"))
        if system or rating or level:
            try:
                only = rated_pair_ids(study=study, system=system, rating=rating, level=level)
            except ValueError as exc:
                context["error"] = str(exc)
                return render(request, "leaderboard/unit_list.html", context, status=400)
            rated = {"system": system, "rating": rating, "level": level, "pairs": only}
        judge = request.GET.get("judge") or None
        disagree = request.GET.get("disagree") == "1"
        context |= {
            "state": state,
            "retry_seconds": RETRY_SECONDS,
            "judge": judge,
            "disagree": disagree,
            "rated": rated,
        }
        if state.payload is None:
            return _marked(render(request, "leaderboard/unit_list.html", context), state)
        sources = [s for s in state.payload["metadata"]["sources"] if s != HUMAN]
        page, rows = unit_page_get(
            snapshot=state.snapshot,
            sources=sources,
            judge=judge,
            disagree=disagree,
            only=rated["pairs"] if rated else None,
            page=request.GET.get("page"),
            page_size=self.page_size,
        )
        query = request.GET.copy()
        query.pop("page", None)
        context |= {
            "page": page,
            "rows": rows,
            "count": page.paginator.count,
            "sources": sources,
            "query": query.urlencode(),
        }
        return _marked(render(request, "leaderboard/unit_list.html", context), state)


class StudyUnitDetailView(ResearcherRequiredMixin, View):
    def get(self, request: HttpRequest, slug: str, pair_id: int) -> HttpResponse:
        study = get_study_or_404(request, slug)
        try:
            detail = unit_detail_get(study=study, pair_id=pair_id)
        except Pair.DoesNotExist as exc:
            raise Http404("No such unit.") from exc
        return render(request, "leaderboard/unit_detail.html", {"study": study, **detail})
