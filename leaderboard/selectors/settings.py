"""A study's own report parameters (ReportSettings), as the report's ReportParams."""

from __future__ import annotations

from annotation.models import Study, System
from leaderboard.models import ReportSettings
from leaderboard.report.base import ReportParams


def report_params_for(*, study: Study) -> ReportParams:
    """The parameters the study's pages, API, exports and recomputes use: ReportParams' defaults
    with the study's baseline and PL price where it set them (one primary-key read)."""
    found = ReportSettings.objects.filter(study=study).values("baseline", "pl_usd_per_1000").first()
    if found is None:
        return ReportParams()
    return ReportParams(baseline=found["baseline"], pl_usd_per_1000=float(found["pl_usd_per_1000"]))


def report_settings_get(*, study: Study) -> ReportSettings | None:
    """The study's stored settings row with who changed it last, or None before any change."""
    return ReportSettings.objects.filter(study=study).select_related("updated_by").first()


def report_baseline_choices(*, study: Study) -> list[str]:
    """The names of the study's systems, sorted: what a baseline may be."""
    names = System.objects.filter(study=study).values_list("name", flat=True).distinct()
    return sorted(set(names))
