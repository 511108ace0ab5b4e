"""The report as the page and the standalone HTML file show it."""

from __future__ import annotations

from typing import Any

from django.contrib.staticfiles import finders
from django.template.loader import render_to_string

from annotation.models import Study
from leaderboard.report import agreement, answer_ratings, per_category
from leaderboard.report.document import Report, report_render


def report_page_context(report: Report) -> dict[str, Any]:
    """What the report's templates read: the typed report, its counts, its rendered sections,
    the judge names, categories and rated answers for the drill-down links."""
    ratings = report.result(answer_ratings.SECTION)
    levels = answer_ratings.drill_levels(ratings)
    return {
        "rating_links": [(s.system, levels) for s in ratings.systems] if levels else [],
        "report": report,
        "counts": report.result(agreement.SECTION).counts,
        "sections": report_render(report),
        "judge_names": list(report.context.judges),
        "categories": [c.category for c in report.result(per_category.SECTION).categories],
    }


def _stylesheet() -> str:
    path = finders.find("concord.css")
    if not isinstance(path, str):
        raise FileNotFoundError("the stylesheet concord.css is not among the static files")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def report_to_html(report: Report, *, study: Study) -> bytes:
    """The report as one self-contained HTML page: styles inline, plots as inline SVG, no
    scripts and no links to other files."""
    context = report_page_context(report) | {"study": study, "inline_css": _stylesheet()}
    return render_to_string("leaderboard/report_standalone.html", context).encode("utf-8")
