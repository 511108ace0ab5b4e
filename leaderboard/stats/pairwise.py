"""Percent agreement between two sources of A / B / tie votes (MT-Bench S1 and S2).

Votes are long format: one row per vote with a unit key (for Concord: prompt, unordered pair of
answers, turn), a label in {"A", "B", "tie"} in canonical A/B terms, and a rater id. Source: L.
Zheng et al. (2023), "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", NeurIPS Datasets
and Benchmarks, section 4.2 and Table 2 (S1: tie is its own class; S2: comparisons involving a tie
are left out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

LABELS = ("A", "B", "tie")
Level = Literal["vote", "majority"]
_COLUMNS = ["key", "agree_s1", "total_s1", "agree_s2", "total_s2"]


@dataclass(frozen=True)
class AgreementCount:
    """``agree`` of ``total`` compared vote pairs agreed; ``rate`` is None when ``total`` is 0."""

    agree: int
    total: int
    rate: float | None

    @classmethod
    def of(cls, agree: int, total: int) -> AgreementCount:
        """Build a count, computing ``rate = agree / total`` (None for no comparisons)."""
        return cls(int(agree), int(total), float(agree / total) if total else None)


@dataclass(frozen=True)
class PairwiseAgreement:
    """Agreement with ties as a class (``s1``) and with tie votes dropped (``s2``)."""

    s1: AgreementCount
    s2: AgreementCount
    level: Level


@dataclass(frozen=True)
class AgreementInterval:
    """A pooled agreement rate with its bootstrap percentile interval over units."""

    rate: float
    lower: float
    upper: float
    confidence: float
    rounds: int
    seed: int
    n_units: int


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


def pairwise_agreement(
    votes: pd.DataFrame,
    other: pd.DataFrame | None = None,
    *,
    level: Level = "vote",
    key: str = "key",
    label: str = "label",
    rater: str = "rater",
) -> PairwiseAgreement:
    """Return percent agreement with ties (S1) and without tie votes (S2).

    Formula: ``rate = agree / total`` over compared vote pairs. Source: Zheng et al. (2023),
    "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", Table 2 and its reference code.

    - ``other`` given (e.g. judge vs human), ``level="vote"``: each vote of ``votes`` is compared
      with each vote of ``other`` on the same key.
    - ``other`` None (e.g. human vs human), ``level="vote"``: every unordered pair of votes on the
      same key cast by different raters (two votes of one rater are never compared).
    - ``level="majority"`` (needs ``other``): each source's majority label per key is compared, one
      comparison per key both sources voted on. A tied majority (two or more labels share the top
      count, e.g. one A and one B) counts as "tie".
    - S1 counts every comparison, tie being its own class (random judge: 1/3). S2 keeps only the
      comparisons where neither side is a tie (random judge: 1/2).

    ``votes`` and ``other`` are long-format DataFrames; ``key``, ``label`` and ``rater`` name their
    columns. Labels must be "A", "B" or "tie" (ValueError otherwise).
    """
    per_unit = pairwise_agreement_by_unit(
        votes, other, level=level, key=key, label=label, rater=rater
    )
    return PairwiseAgreement(
        s1=AgreementCount.of(per_unit["agree_s1"].sum(), per_unit["total_s1"].sum()),
        s2=AgreementCount.of(per_unit["agree_s2"].sum(), per_unit["total_s2"].sum()),
        level=level,
    )


def bootstrap_agreement_ci(
    agree: npt.ArrayLike,
    total: npt.ArrayLike,
    *,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AgreementInterval:
    """Return the pooled agreement ``sum(agree) / sum(total)`` and a bootstrap interval over units.

    Each round draws the units (one entry of ``agree``/``total`` per unit, e.g. the columns of
    :func:`pairwise_agreement_by_unit`) with replacement, ``rng = numpy.random.default_rng(seed)``
    and one ``rng.integers(0, n_units, n_units)`` per round, and recomputes the pooled rate;
    the interval is the percentile interval of those rates (linear interpolation).
    Resampling units rather than vote pairs keeps the votes of one unit together, since they are
    not independent. Source: B. Efron & R. Tibshirani (1993), "An Introduction to the Bootstrap",
    ch. 13 (percentile interval).

    Degenerate input: with no comparisons at all, every field is NaN; a round whose sample holds
    no comparisons is skipped in the percentiles.
    """
    a = np.asarray(agree, dtype=np.float64)
    t = np.asarray(total, dtype=np.float64)
    if a.shape != t.shape or a.ndim != 1:
        raise ValueError("agree and total must be 1-D and of equal length")
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
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
