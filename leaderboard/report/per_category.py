"""Per-category correlation: how closely each judge's score of a unit follows the people's, within
each task category (the H4 study's correlation with people per category)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import (
    Plot,
    RenderContext,
    ReportData,
    Section,
    Table,
    correlation_over_prompts,
)
from leaderboard.stats.correlation import Correlation
from leaderboard.stats.likert import preference_sign

if TYPE_CHECKING:
    import pandas as pd

DEFINITION = (
    "per unit, the mean canonical Likert score (or, without Likert, the mean of A=-1, "
    "tie=0, B=+1); correlated across the category's units judged by both"
)


@dataclass(frozen=True)
class JudgeCorrelation:
    pearson: Correlation
    spearman: Correlation


@dataclass(frozen=True)
class CategoryRow:
    category: str
    units: int
    judges: dict[str, JudgeCorrelation]


@dataclass(frozen=True)
class PerCategoryResult:
    scale: Literal["likert", "preference_sign"]
    definition: str
    categories: list[CategoryRow]


def unit_scores(
    frame: pd.DataFrame, scale: str, pair_ids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Each unit's mean score from the frame's votes, at the unit's position in the sorted
    `pair_ids`, and whether it has one: the mean canonical Likert score of the votes that have
    one, or the mean of A=-1, tie=0, B=+1. Sums by position (exact: the scores are halves)."""
    voted = frame["pair_id"].to_numpy(dtype=np.int64)
    if len(pair_ids) == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    at = np.minimum(np.searchsorted(pair_ids, voted), len(pair_ids) - 1)
    known = pair_ids[at] == voted
    if scale == "likert":
        score = frame["likert"].to_numpy(dtype=np.float64)
        known &= ~np.isnan(score)
    else:
        score = preference_sign(frame["label"])
    count = np.bincount(at[known], minlength=len(pair_ids))
    total = np.bincount(at[known], weights=score[known], minlength=len(pair_ids))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan), count > 0


def category_correlation(
    data: ReportData,
    xs: npt.NDArray[np.float64],
    ys: npt.NDArray[np.float64],
    prompts: npt.NDArray[np.int64],
) -> JudgeCorrelation:
    """Pearson and Spearman over a category's units with their intervals over the units'
    prompts (:func:`leaderboard.report.base.correlation_over_prompts`): unit scores are
    heavily tied and the units of one prompt are not independent."""
    return JudgeCorrelation(
        correlation_over_prompts(data, xs, ys, prompts, "pearson"),
        correlation_over_prompts(data, xs, ys, prompts, "spearman"),
    )


def per_category_compute(data: ReportData) -> PerCategoryResult:
    """Per category: correlation over units between the people's mean score and each judge's.

    Unit scores are computed once per source over all units, as arrays by the unit's position
    among the pairs, then taken per category by the category's codes."""
    import pandas as pd

    votes = data.votes
    human, judges = votes.human, votes.judges
    has_likert = human["likert"].notna().any() and judges["likert"].notna().any()
    scale: Literal["likert", "preference_sign"] = "likert" if has_likert else "preference_sign"
    pairs = votes.pairs
    if not pairs["pair_id"].is_monotonic_increasing:
        pairs = pairs.sort_values("pair_id", kind="stable")
    pair_ids = pairs["pair_id"].to_numpy(dtype=np.int64)
    category_codes, names = pd.factorize(pairs["category"], sort=True)
    pair_prompts = pairs["prompt_id"].to_numpy(dtype=np.int64)
    people, people_has = unit_scores(human, scale, pair_ids)
    sources = data.judge_names
    judge_all = {s: unit_scores(data.frames[s], scale, pair_ids) for s in sources}
    rows = []
    for code, category in sorted(enumerate(names.tolist()), key=lambda item: item[1]):
        mine = people_has & (category_codes == code)
        entry = {}
        for source in sources:
            judge, judge_has = judge_all[source]
            both = mine & judge_has
            entry[source] = category_correlation(
                data, people[both], judge[both], pair_prompts[both]
            )
        rows.append(CategoryRow(str(category), int(mine.sum()), entry))
    return PerCategoryResult(scale, DEFINITION, rows)


class PerCategorySection(Section[PerCategoryResult]):
    key = "per_category"
    title = "Correlation with people per category"
    definition = (
        "Within each category, the correlation over units between the people's mean score and "
        "each judge's score (Pearson r and Spearman rho, each with a bootstrap interval over "
        "prompts)."
    )
    result_type = PerCategoryResult

    def compute(self, data: ReportData) -> PerCategoryResult:
        return per_category_compute(data)

    def tables(self, result: PerCategoryResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for entry in result.categories:
            for judge in sorted(entry.judges):
                pearson, spearman = entry.judges[judge].pearson, entry.judges[judge].spearman
                rows.append(
                    (
                        entry.category,
                        judge,
                        pearson.estimate,
                        pearson.lower,
                        pearson.upper,
                        spearman.estimate,
                        spearman.lower,
                        spearman.upper,
                        pearson.n,
                        pearson.interval,
                    )
                )
        return [
            Table(
                "category-correlation",
                "Correlation with people per category",
                (
                    "category",
                    "judge",
                    "pearson r",
                    "lower",
                    "upper",
                    "spearman rho",
                    "spearman lower",
                    "spearman upper",
                    "units",
                    "interval",
                ),
                tuple(rows),
                note=result.definition,
            )
        ]

    def plots(self, result: PerCategoryResult, context: RenderContext) -> list[Plot]:
        categories = result.categories
        judges = sorted({j for c in categories for j in c.judges})
        if not categories or not judges:
            return []
        series = [
            Series(
                name=judge,
                values=[c.judges[judge].pearson.estimate for c in categories],
                lower=[c.judges[judge].pearson.lower for c in categories],
                upper=[c.judges[judge].pearson.upper for c in categories],
            )
            for judge in judges
        ]
        title = "Correlation with people per category (Pearson r)"
        return [
            Plot(
                "category-correlation",
                title,
                bar_chart_svg(
                    title=title,
                    categories=[c.category for c in categories],
                    series=series,
                    y_label="Pearson r",
                    y_min=-1.0,
                    y_max=1.0,
                ),
            )
        ]


SECTION = PerCategorySection()
