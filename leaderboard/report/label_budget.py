"""Label budget: how each judge's agreement with people, and the people's leaderboard, would firm
up with more human labels (issue 29's planner; statistics in ``leaderboard.stats.planning``).

The snapshot keeps each judge's variance components, so the planner page answers any target the
researcher types ("N more judgments, about $X, to reach ± Y points") from the snapshot alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import HUMAN, Plot, RenderContext, ReportData, Section, Table
from leaderboard.stats.pairwise import pairwise_agreement_by_unit
from leaderboard.stats.planning import (
    VarianceComponents,
    floor_half_width,
    labels_for_half_width,
    projected_half_width,
    rank_stability,
    variance_components_from_sums,
)

if TYPE_CHECKING:
    import pandas as pd

# The label counts the section projects to, as multiples of the people's votes so far.
MULTIPLIERS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
STABILITY_ROUNDS = 30
DEFINITION = (
    "Projected half width of each judge's 95% agreement interval (vote level, ties as a class) "
    "at more human votes on the same prompts: z sqrt(s_b^2 / C + s_w^2 / n), with the variance "
    "between prompts s_b^2 and within a prompt s_w^2 estimated by one-way ANOVA (Searle, Casella "
    "& McCulloch 1992); s_b^2 / C is a floor that more votes on these prompts cannot lower. "
    "Leaderboard stability: mean Kendall tau-b of Bradley-Terry leaderboards on n resampled "
    "human votes against the current one."
)
_WINNER = {"A": "model_a", "B": "model_b", "tie": "tie"}


@dataclass(frozen=True)
class BudgetPoint:
    """The projection at ``human_votes`` votes (``multiplier`` times the current ones)."""

    multiplier: float
    human_votes: int
    half_width: float


@dataclass(frozen=True)
class JudgeBudget:
    """One judge's agreement with people and what more votes would do to its interval.

    ``comparisons`` are the (judge vote, human vote) pairs on shared units, ``per_vote`` of them
    per human vote (what a new human vote adds); the components are over ``prompts`` prompts."""

    comparisons: int
    per_vote: float
    components: VarianceComponents
    half_width: float
    floor_half_width: float
    points: tuple[BudgetPoint, ...]


@dataclass(frozen=True)
class StabilityPoint:
    multiplier: float
    human_votes: int
    kendall_tau: float


@dataclass(frozen=True)
class LabelBudgetResult:
    definition: str
    confidence: float
    human_votes: int
    stability: tuple[StabilityPoint, ...]
    judges: dict[str, JudgeBudget]


def judge_budget(
    mine: pd.DataFrame, human: pd.DataFrame, prompt_of: pd.Series, *, confidence: float
) -> JudgeBudget | None:
    """The judge's variance components of vote-level agreement (S1) with people, grouped by
    prompt, and its projected half width at the section's multiples of the human votes."""
    per_unit = pairwise_agreement_by_unit(mine, human, key="pair_id")
    if per_unit.empty:
        return None
    prompts = prompt_of.reindex(per_unit["key"]).to_numpy()
    grouped = per_unit.groupby(prompts, sort=True)[["agree_s1", "total_s1"]].sum()
    agree = grouped["agree_s1"].to_numpy(dtype=np.float64)
    components = variance_components_from_sums(grouped["total_s1"].to_numpy(), agree, agree)
    compared_votes = int(human["pair_id"].isin(per_unit["key"]).sum())
    per_vote = components.labels / compared_votes if compared_votes else math.nan
    votes = len(human)
    points = tuple(
        BudgetPoint(
            multiplier,
            round(votes * multiplier),
            projected_half_width(
                components,
                labels=round(components.labels * multiplier),
                prompts=components.prompts,
                confidence=confidence,
            ),
        )
        for multiplier in MULTIPLIERS
    )
    floor = floor_half_width(components, prompts=components.prompts, confidence=confidence)
    return JudgeBudget(
        comparisons=components.labels,
        per_vote=per_vote,
        components=components,
        half_width=points[0].half_width,
        floor_half_width=floor,
        points=points,
    )


def label_budget_compute(data: ReportData) -> LabelBudgetResult:
    """Every judge's budget and the people's leaderboard stability (see the module docstring)."""
    import pandas as pd

    human = data.frames[HUMAN]
    prompt_of = data.votes.pairs.set_index("pair_id")["prompt_id"]
    judges = {}
    for name in data.judge_names:
        budget = judge_budget(
            data.frames[name], human, prompt_of, confidence=data.params.confidence
        )
        if budget is not None:
            judges[name] = budget
    battles = pd.DataFrame(
        {
            "model_a": human["system_a"].astype(str).to_numpy(),
            "model_b": human["system_b"].astype(str).to_numpy(),
            "winner": human["label"].astype(str).map(_WINNER).to_numpy(),
        }
    )
    sizes = [max(1, round(len(human) * m)) for m in MULTIPLIERS]
    taus = rank_stability(battles, sizes=sizes, rounds=STABILITY_ROUNDS, seed=data.params.seed)
    stability = tuple(
        StabilityPoint(m, size, tau) for m, size, tau in zip(MULTIPLIERS, sizes, taus, strict=True)
    )
    return LabelBudgetResult(DEFINITION, data.params.confidence, len(human), stability, judges)


def _points(value: float) -> float | None:
    """A rate's half width in percentage points, None when unknown."""
    return None if math.isnan(value) else 100.0 * value


class LabelBudgetSection(Section[LabelBudgetResult]):
    key = "label_budget"
    title = "Label budget"
    definition = (
        "How much more human votes would narrow each judge's agreement interval and steady the "
        "people's leaderboard; the planner page prices a target."
    )
    result_type = LabelBudgetResult

    def compute(self, data: ReportData) -> LabelBudgetResult:
        return label_budget_compute(data)

    def tables(self, result: LabelBudgetResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for judge in context.judges:
            budget = result.judges.get(judge)
            if budget is None:
                continue
            for point in budget.points:
                rows.append(
                    (
                        judge,
                        point.human_votes,
                        f"{point.multiplier:g}x",
                        _points(point.half_width),
                        _points(budget.floor_half_width),
                    )
                )
        stability = tuple(
            (p.human_votes, f"{p.multiplier:g}x", p.kendall_tau) for p in result.stability
        )
        return [
            Table(
                "label-budget",
                "Projected agreement interval (± percentage points)",
                ("judge", "human votes", "of now", "half width", "floor (these prompts)"),
                tuple(rows),
                note=result.definition,
            ),
            Table(
                "leaderboard-stability",
                "People's leaderboard stability with more votes",
                ("human votes", "of now", "Kendall tau-b"),
                stability,
                note=f"{STABILITY_ROUNDS} resampled leaderboards per size, against the current one",
            ),
        ]

    def plots(self, result: LabelBudgetResult, context: RenderContext) -> list[Plot]:
        judges = [j for j in context.judges if j in result.judges]
        if not judges:
            return []
        title = "Agreement interval half width with more human votes"
        categories = [f"{m:g}x" for m in MULTIPLIERS]
        series = [
            Series(judge, [_points(p.half_width) for p in result.judges[judge].points])
            for judge in judges
        ]
        svg = bar_chart_svg(
            title=title, categories=categories, series=series, y_label="± points", y_min=0.0
        )
        return [Plot("label-budget", title, svg, note="x: multiples of the current human votes")]


SECTION = LabelBudgetSection()


@dataclass(frozen=True)
class PlannerAnswer:
    """What a target half width costs for one judge: the human votes it needs in all (None:
    out of reach on ``prompts`` prompts, whose floor is ``floor_half_width``), those beyond the
    current ones, and their pay."""

    judge: str
    target_half_width: float
    prompts: int
    floor_half_width: float
    votes_needed: int | None
    additional_votes: int | None
    cost_cents: int | None


def label_budget_plan(
    result: LabelBudgetResult,
    *,
    judge: str,
    target_half_width: float,
    cents_per_judgment: int,
    prompts: int | None = None,
) -> PlannerAnswer:
    """Answer "how many more human votes, at what pay, to reach ± target" from a stored
    section result: the comparisons the target needs (``labels_for_half_width`` of the judge's
    components, on ``prompts`` prompts: default the current ones, more for a pilot), turned
    into human votes at the judge's comparisons per vote, priced at the study's pay."""
    budget = result.judges.get(judge)
    if budget is None:
        raise KeyError(f"no label budget for judge {judge!r}")
    if not target_half_width > 0:
        raise ValueError("the target half width must be positive")
    comp = budget.components
    count = prompts if prompts is not None else comp.prompts
    if count < comp.prompts:
        raise ValueError(f"the votes so far cover {comp.prompts} prompts; give at least that many")
    floor = floor_half_width(comp, prompts=count, confidence=result.confidence)
    comparisons = labels_for_half_width(
        comp, target=target_half_width, prompts=count, confidence=result.confidence
    )
    if comparisons is None or not budget.per_vote > 0:
        return PlannerAnswer(judge, target_half_width, count, floor, None, None, None)
    votes = math.ceil(comparisons / budget.per_vote - 1e-9)
    additional = max(0, votes - result.human_votes)
    return PlannerAnswer(
        judge,
        target_half_width,
        count,
        floor,
        votes,
        additional,
        additional * cents_per_judgment,
    )


def plan_sentence(answer: PlannerAnswer, *, cents_per_judgment: int) -> str:
    """The planner's answer in one sentence, as the page and `plan_labels` print it."""
    target = f"± {100 * answer.target_half_width:.1f} points"
    floor = f"± {100 * answer.floor_half_width:.1f}"
    if answer.votes_needed is None or answer.additional_votes is None:
        return (
            f"{answer.judge}: {target} is out of reach on {answer.prompts} prompts (more votes "
            f"on them cannot go below {floor} points); plan votes on more prompts."
        )
    if answer.additional_votes == 0:
        return (
            f"{answer.judge}: {target} is reached already ({answer.votes_needed} human votes "
            f"suffice on {answer.prompts} prompts)."
        )
    dollars = (answer.cost_cents or 0) / 100
    return (
        f"{answer.judge}: {answer.additional_votes} more judgments, about ${dollars:,.2f} at "
        f"{cents_per_judgment}¢ per judgment, to reach {target} ({answer.votes_needed} human "
        f"votes in all on {answer.prompts} prompts; the floor there is {floor} points)."
    )
