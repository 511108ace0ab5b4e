"""The report's sections, in the order the page, the JSON, the CSV and HTML reports and the docs
show them. Adding a section is one module in this package (a :class:`Section` subclass and its
``SECTION`` instance, with the reads it declares) and one line here; see docs/analysis.md,
"Adding a section"."""

from __future__ import annotations

from typing import Any

from leaderboard.report import (
    advisorqa,
    agreement,
    agreement_cost,
    answer_ratings,
    consistency,
    gold,
    gold_order,
    label_budget,
    leaderboards,
    length_bias,
    per_category,
    position_bias,
    rationale,
    single_grades,
    style_control,
    win_rates,
)
from leaderboard.report.base import Section
from leaderboard.selectors.reads import Read
from leaderboard.selectors.section_reads import READS

SECTIONS: tuple[Section[Any], ...] = (
    agreement.SECTION,
    per_category.SECTION,
    position_bias.SECTION,
    gold.SECTION,
    leaderboards.SECTION,
    length_bias.SECTION,
    style_control.SECTION,
    rationale.SECTION,
    answer_ratings.SECTION,
    gold_order.SECTION,
    advisorqa.SECTION,
    win_rates.SECTION,
    single_grades.SECTION,
    consistency.SECTION,
    label_budget.SECTION,
    agreement_cost.SECTION,
)


def section_get(key: str) -> Section[Any]:
    """The registered section with that key."""
    for section in SECTIONS:
        if section.key == key:
            return section
    raise KeyError(f"no report section {key!r}")


def reads_declared() -> tuple[Read[Any], ...]:
    """Every read some registered section declares, once each, in the order of
    :data:`leaderboard.selectors.section_reads.READS` (a declared read missing there is an
    error: the data hash would not see it)."""
    declared = {read.key: read for section in SECTIONS for read in section.reads}
    missing = sorted(set(declared) - {read.key for read in READS})
    if missing:
        raise LookupError(f"reads declared by sections but not in READS: {missing}")
    return tuple(read for read in READS if read.key in declared)
