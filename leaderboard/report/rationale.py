"""Rationales: which of the seven values people cite for the better answer (AdvisorQA, Kim et al.
2024, Fig. 4), overall, by category, where two judges disagree and the people side with one, and,
in a follow-up study of two judge runs' disagreements, split by which run voted the better answer
(Fig. 4's two bars)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from core.conventions import SEVEN_VALUE_KEYS
from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import (
    Plot,
    RenderContext,
    ReportData,
    Section,
    Table,
    share_over_prompts,
)
from leaderboard.selectors.section_reads import ORIGIN, VALUES
from leaderboard.stats.rationale import rationale_distribution

if TYPE_CHECKING:
    import pandas as pd

DEFINITION = (
    "Judgments that cite at least one of the seven values; count = judgments citing the value, "
    "share = count / judgments, share_of_mentions = count / all citations. Judge disagreement: "
    "for judges X and Y, the pairs where their votes differ and the people's majority (a unique "
    "most common label, A or B) equals X's vote; the values are those cited by the people who "
    "voted with the majority. Each share's interval: a bootstrap over prompts (every judgment "
    "of a drawn prompt; interval unit: prompt). Follow-up split (a follow-up study of two "
    "judge runs' disagreements): the judgments on the pairs where the first run voted the "
    "better answer shown, on those where the second did, and on those where neither did (one "
    "voted a tie, the other the worse answer)."
)
GROUP_TEXT = {
    "first": "{first} voted the better answer",
    "second": "{second} voted the better answer",
    "neither": "neither run voted the better answer",
}


@dataclass(frozen=True)
class ValueShare:
    value: str
    count: int
    share: float | None
    share_of_mentions: float | None
    # The interval of `share`: a bootstrap over prompts (None with fewer than two prompts).
    lower: float | None = None
    upper: float | None = None


@dataclass(frozen=True)
class Distribution:
    judgments: int
    unknown_mentions: int
    values: list[ValueShare]
    # What an interval's bootstrap round drew ("prompt", or "judgment" when the report
    # resamples votes), how many of them, and the rounds.
    interval_unit: str = ""
    clusters: int = 0
    rounds: int = 0


@dataclass(frozen=True)
class CategoryDistribution(Distribution):
    category: str = ""


@dataclass(frozen=True)
class Disagreement(Distribution):
    with_: str = field(default="", metadata={"json": "with"})
    against: str = ""
    pairs: int = 0


@dataclass(frozen=True)
class FollowupGroup(Distribution):
    agreed: str = ""  # first, second or neither
    label: str = ""
    pairs: int = 0


@dataclass(frozen=True)
class FollowupSplit:
    """A follow-up study's values by which of its source's two runs voted the better answer."""

    source_study: str
    first: str
    second: str
    agreeing: str
    groups: list[FollowupGroup]


@dataclass(frozen=True)
class RationaleResult:
    definition: str
    value_keys: list[str]
    overall: Distribution
    by_category: list[CategoryDistribution]
    judge_disagreement: list[Disagreement]
    followup: FollowupSplit | None = None


def distribution(data: ReportData, rows: pd.DataFrame) -> Distribution:
    """How often each of the seven values is cited in the judgments ``rows`` (columns
    ``values`` and ``pair_id``); unknown keys are counted and left out. Each value's share has
    the report's interval over prompts (:func:`leaderboard.report.base.share_over_prompts`):
    a judgment's citations are not independent of the other judgments on its prompt."""
    kept: list[list[str]] = []
    unknown = 0
    for selection in rows["values"]:
        known = [v for v in selection if v in SEVEN_VALUE_KEYS]
        unknown += len(set(selection)) - len(set(known))
        kept.append(known)
    table = rationale_distribution(kept)
    pair_ids = rows["pair_id"].to_numpy(dtype=np.int64)
    shares: list[ValueShare] = []
    unit, clusters, rounds = "", 0, 0
    for row in table.to_dict("records"):
        lower = upper = None
        if kept:
            hits = np.array([row["value"] in selection for selection in kept], dtype=bool)
            interval = share_over_prompts(data, hits, pair_ids, unit="judgment")
            lower, upper = interval.lower, interval.upper
            unit, clusters, rounds = interval.resampled, interval.clusters, interval.rounds
        shares.append(
            ValueShare(
                str(row["value"]),
                int(row["count"]),
                row["share"],
                row["share_of_mentions"],
                lower,
                upper,
            )
        )
    return Distribution(
        judgments=len(kept),
        unknown_mentions=unknown,
        values=shares,
        interval_unit=unit,
        clusters=clusters,
        rounds=rounds,
    )


def followup_split(data: ReportData, values: pd.DataFrame) -> FollowupSplit | None:
    """The follow-up's values by group (its declared read `ORIGIN`), over the report's pairs; a
    group the follow-up has no pair of is left out (a follow-up of one run's wins has one)."""
    origin = data.read(ORIGIN).followup
    if origin is None:
        return None
    pairs = origin.pairs[origin.pairs["pair_id"].isin(data.votes.pairs["pair_id"])]
    groups = []
    for agreed in ("first", "second", "neither"):
        ids = pairs.loc[pairs["agreed"] == agreed, "pair_id"]
        if ids.empty:
            continue
        d = distribution(data, values[values["pair_id"].isin(ids)])
        label = GROUP_TEXT[agreed].format(first=origin.first, second=origin.second)
        groups.append(FollowupGroup(**vars(d), agreed=agreed, label=label, pairs=len(ids)))
    return FollowupSplit(
        source_study=origin.source_study,
        first=origin.first,
        second=origin.second,
        agreeing=origin.agreeing,
        groups=groups,
    )


def rationale_compute(data: ReportData) -> RationaleResult:
    votes = data.votes
    values = data.read(VALUES).frame
    category_of = votes.pairs.set_index("pair_id")["category"]
    values = values[values["pair_id"].isin(category_of.index)]
    by_category = []
    if not values.empty:
        categories = category_of.reindex(values["pair_id"]).to_numpy()
        for category in sorted(set(categories.tolist())):
            d = distribution(data, values[categories == category])
            by_category.append(CategoryDistribution(**vars(d), category=str(category)))
    majority = data.majority
    judge_votes = {s: data.frames[s].set_index("pair_id")["label"] for s in data.judge_names}
    # A run without votes (a reward model's scores only) cannot disagree with anyone.
    judge_votes = {name: labels for name, labels in judge_votes.items() if len(labels)}
    disagreement = []
    for x, y in itertools.permutations(sorted(judge_votes), 2):
        vx, vy = judge_votes[x], judge_votes[y]
        both = vx.index.intersection(vy.index).intersection(majority.index)
        side = majority.loc[both]
        chosen = both[
            (
                (vx.loc[both] != vy.loc[both]) & (side == vx.loc[both]) & side.isin(["A", "B"])
            ).to_numpy()
        ]
        wanted = majority.loc[chosen]
        mine = values[values["pair_id"].isin(chosen)]
        mine = mine[mine["label"].to_numpy() == wanted.reindex(mine["pair_id"]).to_numpy()]
        d = distribution(data, mine)
        disagreement.append(Disagreement(**vars(d), with_=x, against=y, pairs=len(chosen)))
    return RationaleResult(
        definition=DEFINITION,
        value_keys=list(SEVEN_VALUE_KEYS),
        overall=distribution(data, values),
        by_category=by_category,
        judge_disagreement=disagreement,
        followup=followup_split(data, values),
    )


def _rows(scope: str, entry: Distribution) -> list[tuple[Any, ...]]:
    return [
        (
            scope,
            row.value,
            entry.judgments,
            row.count,
            row.share,
            row.lower,
            row.upper,
            entry.interval_unit,
        )
        for row in entry.values
    ]


def _shares(name: str, entry: Distribution) -> Series:
    return Series(name=name, values=[row.share for row in entry.values])


class RationaleSection(Section[RationaleResult]):
    key = "rationale"
    title = "Values cited for the better answer"
    definition = "Which of the seven values people name as the reason the better answer wins."
    result_type = RationaleResult
    reads = (
        ORIGIN,
        VALUES,
    )

    def compute(self, data: ReportData) -> RationaleResult:
        return rationale_compute(data)

    def tables(self, result: RationaleResult, context: RenderContext) -> list[Table]:
        rows = _rows("overall", result.overall)
        for entry in result.by_category:
            rows += _rows(f"category {entry.category}", entry)
        for d in result.judge_disagreement:
            rows += _rows(f"people side with {d.with_} against {d.against} ({d.pairs} pairs)", d)
        if result.followup is not None:
            for g in result.followup.groups:
                rows += _rows(f"follow-up: {g.label} ({g.pairs} pairs)", g)
        return [
            Table(
                "rationale",
                "Values cited for the better answer",
                (
                    "scope",
                    "value",
                    "judgments",
                    "count",
                    "citing share",
                    "lower",
                    "upper",
                    "interval unit",
                ),
                tuple(rows) if result.overall.judgments else (),
                note=result.definition,
            )
        ]

    def plots(self, result: RationaleResult, context: RenderContext) -> list[Plot]:
        if not result.overall.judgments:
            return []
        keys = result.value_keys
        series = [_shares("overall", result.overall)]
        series += [
            _shares(f"with {d.with_} vs {d.against}", d)
            for d in result.judge_disagreement
            if d.judgments
        ]
        title = "Values cited for the better answer (share of judgments)"
        plots = [
            Plot(
                "rationale",
                title,
                bar_chart_svg(
                    title=title, categories=keys, series=series, y_label="share", y_min=0.0
                ),
            )
        ]
        split = result.followup
        if split is not None and any(g.judgments for g in split.groups):
            title = (
                f"Values where each judge voted the better answer (follow-up of "
                f"{split.source_study or 'a deleted study'}; share of judgments)"
            )
            plots.append(
                Plot(
                    "rationale-followup",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=keys,
                        series=[
                            _shares(f"{g.label} ({g.judgments})", g)
                            for g in split.groups
                            if g.judgments
                        ],
                        y_label="share",
                        y_min=0.0,
                    ),
                    note=(
                        f"Pairs where {split.first} and {split.second} vote differently, by "
                        "which of them voted the better answer shown (AdvisorQA, Fig. 4)."
                    ),
                )
            )
        if len(result.by_category) > 1:
            title = "Values cited by category (share of judgments)"
            plots.append(
                Plot(
                    "rationale-by-category",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=keys,
                        series=[_shares(e.category, e) for e in result.by_category],
                        y_label="share",
                        y_min=0.0,
                    ),
                )
            )
        return plots


SECTION = RationaleSection()
