"""The report's straightforward implementation, kept as the benchmark's baseline.

These are the versions of the report's hot spots before they were made fast: pandas group-bys
on string labels for agreement, one resample of unit indices per bootstrap round, battles
mapped label by label, a pivot table for flip rates, group-bys and index intersections for the
per-category correlations, the kappas against the people's majority and Fleiss' counts.
`baseline()` swaps them in, so that the benchmark times the same report both ways in one run,
and tests check both give the same numbers.

Elo is not swapped: both runs use the one compiled kernel, whose reference (a per-battle loop
replaying the same draws) lives with the tests, `tests/leaderboard/reference_elo.py`, and is
timed against the kernel by `benchmarks/bench_elo.py`. A second, slower Elo engine kept here
only for the ratio would be an engine nobody runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.report import agreement, leaderboards, per_category
from leaderboard.report import position_bias as position_bias_section
from leaderboard.report.agreement import FleissResult, Kappa, WeightedKappa
from leaderboard.report.base import ReportData
from leaderboard.report.per_category import CategoryRow, PerCategoryResult
from leaderboard.report.position_bias import JudgeBias, ShareFn
from leaderboard.stats import pairwise
from leaderboard.stats.agreement import cohen_kappa, fleiss_kappa
from leaderboard.stats.bias import position_bias
from leaderboard.stats.likert import preference_sign
from leaderboard.stats.majority import LABELS, people_majority
from leaderboard.stats.pairwise import AgreementInterval, Level

_COLUMNS = ["key", "agree_s1", "total_s1", "agree_s2", "total_s2"]


def _normalise(votes: pd.DataFrame, key: str, label: str, rater: str) -> pd.DataFrame:
    missing = {key, label, rater} - set(votes.columns)
    if missing:
        raise ValueError(f"votes lack the columns {sorted(missing)}")
    frame = pd.DataFrame(
        {
            "key": votes[key].to_numpy(),
            "label": votes[label].to_numpy(),
            "rater": votes[rater].to_numpy(),
        }
    )
    unknown = set(frame["label"].unique().tolist()) - set(LABELS)
    if unknown:
        raise ValueError(f"labels must be in {LABELS}; found {sorted(map(str, unknown))}")
    return frame


def _label_counts(frame: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    counts = frame.groupby([*index, "label"], sort=False).size().unstack("label", fill_value=0)
    return counts.reindex(columns=list(LABELS), fill_value=0)


def _pairs_within(frame: pd.DataFrame) -> pd.DataFrame:
    """Per key: unordered pairs of votes by different raters, and how many of them agree."""
    if frame.empty:
        return pd.DataFrame({"agree": [], "total": []}, dtype=np.int64)
    by_key = _label_counts(frame, ["key"])
    by_rater = _label_counts(frame, ["key", "rater"])
    n_key = by_key.sum(axis=1)
    n_rater = by_rater.sum(axis=1)
    # All pairs on a key, minus the pairs whose two votes come from the same rater.
    total = n_key * (n_key - 1) // 2
    agree = (by_key * (by_key - 1) // 2).sum(axis=1)
    same_total = (n_rater * (n_rater - 1) // 2).groupby(level="key", sort=False).sum()
    same_agree = (by_rater * (by_rater - 1) // 2).sum(axis=1).groupby(level="key", sort=False).sum()
    out = pd.DataFrame({"agree": agree - same_agree, "total": total - same_total})
    return out.astype(np.int64)


def _pairs_across(x: pd.DataFrame, y: pd.DataFrame) -> pd.DataFrame:
    """Per key present in both: every vote of x against every vote of y."""
    if x.empty or y.empty:
        return pd.DataFrame({"agree": [], "total": []}, dtype=np.int64)
    cx = _label_counts(x, ["key"])
    cy = _label_counts(y, ["key"])
    cx, cy = cx.align(cy, join="inner", axis=0)
    agree = (cx * cy).sum(axis=1)
    total = cx.sum(axis=1) * cy.sum(axis=1)
    return pd.DataFrame({"agree": agree, "total": total}).astype(np.int64)


def _majority(frame: pd.DataFrame) -> pd.DataFrame:
    counts = _label_counts(frame, ["key"])
    values = counts.to_numpy()
    top = values.max(axis=1, keepdims=True)
    unique_top = (values == top).sum(axis=1) == 1
    winner = np.array(LABELS, dtype=object)[values.argmax(axis=1)]
    label = np.where(unique_top, winner, "tie")
    return pd.DataFrame({"key": counts.index.to_numpy(), "label": label, "rater": "majority"})


def pairwise_agreement_by_unit(
    votes: pd.DataFrame,
    other: pd.DataFrame | None = None,
    *,
    level: Level = "vote",
    key: str = "key",
    label: str = "label",
    rater: str = "rater",
) -> pd.DataFrame:
    """Return per unit key the agreeing and compared vote pairs under S1 and S2.

    Columns: key, agree_s1, total_s1, agree_s2, total_s2; one row per key with at least one S1
    comparison. Definitions as :func:`pairwise_agreement` (Zheng et al. 2023, Table 2).
    """
    if level not in ("vote", "majority"):
        raise ValueError("level must be 'vote' or 'majority'")
    x = _normalise(votes, key, label, rater)
    y = None if other is None else _normalise(other, key, label, rater)
    if level == "majority":
        if y is None:
            raise ValueError("majority level compares two sources; pass `other`")
        x, y = _majority(x), _majority(y)

    def compare(decisive_only: bool) -> pd.DataFrame:
        fx = x[x["label"] != "tie"] if decisive_only else x
        if y is None:
            return _pairs_within(fx)
        fy = y[y["label"] != "tie"] if decisive_only else y
        return _pairs_across(fx, fy)

    s1, s2 = compare(False), compare(True)
    s1 = s1[s1["total"] > 0]
    s2 = s2.reindex(s1.index, fill_value=0)
    out = pd.DataFrame(
        {
            "key": s1.index.to_numpy(),
            "agree_s1": s1["agree"].to_numpy(),
            "total_s1": s1["total"].to_numpy(),
            "agree_s2": s2["agree"].to_numpy(),
            "total_s2": s2["total"].to_numpy(),
        },
        columns=_COLUMNS,
    )
    return out.astype({c: np.int64 for c in _COLUMNS[1:]})


def bootstrap_agreement_ci(
    agree: Any, total: Any, *, rounds: int = 1000, confidence: float = 0.95, seed: int = 0
) -> AgreementInterval:
    """One resample of unit indices per round."""
    a = np.asarray(agree, dtype=np.float64)
    t = np.asarray(total, dtype=np.float64)
    n = a.size
    if n == 0 or t.sum() == 0:
        return AgreementInterval(math.nan, math.nan, math.nan, confidence, rounds, seed, n)
    rng = np.random.default_rng(seed)
    rates = np.empty(rounds)
    for r in range(rounds):
        idx = rng.integers(0, n, n)
        sampled_total = t[idx].sum()
        rates[r] = a[idx].sum() / sampled_total if sampled_total else math.nan
    tail = (1.0 - confidence) / 2.0
    lower, upper = np.nanquantile(rates, [tail, 1.0 - tail])
    return AgreementInterval(
        float(a.sum() / t.sum()), float(lower), float(upper), confidence, rounds, seed, n
    )


def _battles(frame: pd.DataFrame, *, ties: bool) -> pd.DataFrame:
    rows = frame if ties else frame[frame["label"] != "tie"]
    winner = rows["label"].map({"A": "model_a", "B": "model_b", "tie": "tie"})
    return pd.DataFrame(
        {
            "model_a": rows["system_a"].to_numpy(),
            "model_b": rows["system_b"].to_numpy(),
            "winner": winner.to_numpy(),
        }
    )


def judge_position_bias(calls: pd.DataFrame, confidence: float, share: ShareFn) -> JudgeBias:
    ordered = calls[calls["order"].isin(["ab", "ba"])]
    shown = ordered.dropna(subset=["likert_shown"])
    histogram = None
    if not shown.empty:
        histogram = position_bias(
            shown["likert_shown"].astype(int).to_numpy(), confidence=confidence
        ).histogram
    decisive = ordered[ordered["label"] != "tie"]
    first_label = np.where(decisive["order"] == "ab", "A", "B")
    first = decisive["label"].to_numpy() == first_label
    wide = ordered.pivot_table(
        index="pair_id", columns="order", values="label", aggfunc="first"
    ).dropna()
    flips = None
    if {"ab", "ba"} <= set(wide.columns) and len(wide):
        flipped = wide["ab"].to_numpy() != wide["ba"].to_numpy()
        flips = share(flipped, wide.index.to_numpy(dtype=np.int64), "pair in both orders")
    return JudgeBias(
        histogram=histogram,
        prefers_first=share(first, decisive["pair_id"].to_numpy(dtype=np.int64), "decisive call"),
        flip_rate=flips,
        calls_with_order=len(ordered),
    )


def _cohen_kappa(
    rater_a: Any, rater_b: Any, weights: Any = None, *, categories: Any = None
) -> float:
    """A dictionary lookup per item before the table is counted."""
    cats = list(categories)
    index = {c: i for i, c in enumerate(cats)}
    a = np.array([index[x] for x in np.asarray(rater_a, dtype=object).tolist()])
    b = np.array([index[x] for x in np.asarray(rater_b, dtype=object).tolist()])
    return cohen_kappa(a, b, weights, categories=list(range(len(cats))))


def _per_category(data: ReportData) -> PerCategoryResult:
    """Unit scores by a group-by per source, split by category through the pairs' index."""

    def unit_scores(frame: pd.DataFrame, scale: str) -> pd.Series:
        if scale == "likert":
            return frame.dropna(subset=["likert"]).groupby("pair_id")["likert"].mean()
        signs = preference_sign(frame["label"].to_numpy())
        return pd.Series(signs, index=frame["pair_id"].to_numpy()).groupby(level=0).mean()

    votes, sources = data.votes, data.judge_names
    human, judges = votes.human, votes.judges
    has_likert = human["likert"].notna().any() and judges["likert"].notna().any()
    scale = "likert" if has_likert else "preference_sign"
    category_of = votes.pairs.set_index("pair_id")["category"]
    prompt_of = votes.pairs.set_index("pair_id")["prompt_id"]
    people_all = unit_scores(human, scale)
    judge_all = {source: unit_scores(data.frames[source], scale) for source in sources}
    people_by_category = dict(
        tuple(people_all.groupby(category_of.reindex(people_all.index).to_numpy()))
    )
    rows = []
    for category in sorted(set(votes.pairs["category"].tolist())):
        people = people_by_category.get(category, pd.Series(dtype=float))
        entry = {}
        for source in sources:
            judge = judge_all[source]
            both = people.index.intersection(judge.index)
            xs, ys = people.loc[both].to_numpy(), judge.loc[both].to_numpy()
            prompts = prompt_of.reindex(both).to_numpy(dtype=np.int64)
            entry[source] = per_category.category_correlation(data, xs, ys, prompts)
        rows.append(CategoryRow(category, len(people), entry))
    return PerCategoryResult(scale, per_category.DEFINITION, rows)  # type: ignore[arg-type]


def kappas(
    judge: pd.DataFrame, human: pd.DataFrame, majority: pd.Series | None = None
) -> tuple[Kappa, WeightedKappa]:
    """The judge against the people's majority through an index intersection, and the weighted
    kappa through a merge of the judge's and the people's Likert votes on the pair."""
    people = people_majority(human)
    mine = judge.set_index("pair_id")["label"]
    both = people.index.intersection(mine.index)
    kappa = (
        cohen_kappa(
            pd.Categorical(mine.loc[both], categories=LABELS).codes.astype(np.int64),
            pd.Categorical(people.loc[both], categories=LABELS).codes.astype(np.int64),
            categories=range(len(LABELS)),
        )
        if len(both)
        else math.nan
    )
    merged = judge[["pair_id", "likert"]].merge(
        human[["pair_id", "likert"]], on="pair_id", suffixes=("_judge", "_human")
    )
    merged = merged.dropna(subset=["likert_judge", "likert_human"])
    weighted = (
        cohen_kappa(
            np.floor(merged["likert_judge"].to_numpy() + 0.5).astype(np.int64),
            merged["likert_human"].to_numpy().astype(np.int64),
            "quadratic",
            categories=list(range(1, 9)),
        )
        if len(merged)
        else math.nan
    )
    return Kappa(kappa, len(both)), WeightedKappa(weighted, "quadratic", len(merged))


def fleiss_table(human: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int, int | None]:
    """The units x labels counts by a group-by on pair and label, unstacked: the units with the
    most common number (>= 2) of votes, their pair ids, the units with 2+ votes, that number."""
    counts = (
        human.groupby(["pair_id", "label"], observed=True).size().unstack("label", fill_value=0)
    )
    counts = counts.reindex(columns=list(LABELS), fill_value=0)
    per_unit = counts.sum(axis=1)
    rated = per_unit[per_unit >= 2]
    if rated.empty:
        return counts.to_numpy()[:0], counts.index.to_numpy()[:0], 0, None
    sizes = rated.value_counts().sort_index()
    # The most common number of votes a unit has (the smallest of equally common ones).
    modal = int(sizes.index[int(sizes.to_numpy().argmax())])
    table = counts[per_unit == modal]
    return table.to_numpy(), table.index.to_numpy(), len(rated), modal


def fleiss(human: pd.DataFrame) -> FleissResult:
    """Fleiss' kappa of :func:`fleiss_table`'s units."""
    table, _, rated, modal = fleiss_table(human)
    if modal is None:
        return FleissResult(math.nan, 0, None, 0)
    return FleissResult(fleiss_kappa(table), len(table), modal, rated)


@contextmanager
def baseline() -> Iterator[None]:
    """Run the report with the straightforward implementations swapped in."""
    swaps: list[tuple[Any, str, Any]] = [
        (pairwise, "pairwise_agreement_by_unit", pairwise_agreement_by_unit),
        (agreement, "pairwise_agreement_by_unit", pairwise_agreement_by_unit),
        (agreement, "bootstrap_agreement_ci", bootstrap_agreement_ci),
        (leaderboards, "battles_of", _battles),
        (position_bias_section, "_judge_bias", judge_position_bias),
        (agreement, "cohen_kappa", _cohen_kappa),
        (per_category, "per_category_compute", _per_category),
        (agreement, "_kappas", kappas),
        (agreement, "_fleiss_table", fleiss_table),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, replacement in swaps:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
