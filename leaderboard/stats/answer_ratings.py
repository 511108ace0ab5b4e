"""Per-answer ratings: the shares of each level of a categorical rating (accept / reject / unsure;
no / partial / yes) with intervals over clusters, and how a pairwise preference relates to the
two answers' ratings.

The Reward (In-)consistency study (Contrast Instructions) has people rate single answers Accept /
Reject / Unsure; the fine-grained axes (relevance, usefulness, factuality, each no / partial /
yes) follow the same form. Agreement among raters on these ratings is Krippendorff's alpha
(:func:`leaderboard.stats.agreement.krippendorff_alpha_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.stats.bootstrap import cluster_sums, percentile_interval


@dataclass(frozen=True)
class LevelShare:
    """One level of a rating: ``count`` of ``total`` ratings, their share and its interval
    (NaN without ratings; NaN ends with fewer than two clusters)."""

    level: str
    count: int
    total: int
    share: float
    lower: float
    upper: float


@dataclass(frozen=True)
class LevelShares:
    """The shares of every level of one rating over the same ratings, in the levels' order; a
    bootstrap round draws ``clusters`` clusters (``resampled`` names them) ``rounds`` times."""

    total: int
    clusters: int
    rounds: int
    confidence: float
    resampled: str
    levels: list[LevelShare]

    def level(self, name: str) -> LevelShare:
        """The share of the level called `name`."""
        for entry in self.levels:
            if entry.level == name:
                return entry
        raise KeyError(name)


def level_shares(
    values: Sequence[str | float | None] | npt.ArrayLike,
    clusters: Sequence[object] | npt.ArrayLike | None,
    levels: Sequence[str],
    *,
    resampled: str,
    rounds: int,
    seed: int,
    confidence: float = 0.95,
) -> LevelShares:
    """Return the share of each level among the ratings, with cluster-bootstrap intervals.

    ``values[i]`` is rating i's level (one of ``levels``; None or NaN: not rated, left out) and
    ``clusters[i]`` its cluster (the prompt its answer belongs to; None: each rating its own
    cluster). Formula: ``share_l = n_l / n``, with ``n_l`` the ratings at level l and ``n`` all
    ratings. Interval: a round draws the C clusters C times with replacement and takes every
    rating of each cluster drawn (:func:`leaderboard.stats.bootstrap.cluster_sums` of the
    clusters' level counts); the round's share of l is its ``n_l / n``, and the interval the
    percentiles of the rounds' shares (:func:`percentile_interval`), the cluster bootstrap of a
    ratio estimator (B. Efron & R. Tibshirani 1993, "An Introduction to the Bootstrap", section
    8.5 and ch. 13). All levels share one set of rounds, so a round's shares sum to 1. Ratings
    of one prompt's answers are not independent (the same prompt is easy or hard for every
    system), hence prompts as clusters. A level not among ``levels`` raises ValueError.
    """
    import pandas as pd

    if len(set(levels)) != len(levels) or not levels:
        raise ValueError("levels must be distinct and at least one")
    raw = pd.Series(np.asarray(values, dtype=object), dtype=object)
    rated = raw.notna().to_numpy()
    known = raw[rated].isin(list(levels))
    if not bool(known.all()):
        unknown = sorted({str(v) for v in raw[rated][~known]})
        raise ValueError(f"unknown level(s) {unknown}; expected one of {list(levels)}")
    codes = pd.Categorical(raw[rated], categories=list(levels)).codes.astype(np.int64)
    if clusters is None:
        cluster_codes = np.arange(codes.size)
    else:
        labels = np.asarray(clusters, dtype=object)
        if labels.shape != (raw.size,):
            raise ValueError("clusters must give one cluster per rating")
        cluster_codes, _ = pd.factorize(pd.Series(labels[rated], dtype=object))
        if (cluster_codes < 0).any():
            raise ValueError("a rating's cluster is missing (None or NaN)")
    k = len(levels)
    n_clusters = int(cluster_codes.max()) + 1 if cluster_codes.size else 0
    table = np.bincount(cluster_codes * k + codes, minlength=n_clusters * k).reshape(n_clusters, k)
    counts = table.sum(axis=0)
    total = int(counts.sum())
    estimates = counts / total if total else np.full(k, math.nan)
    if n_clusters >= 2:
        sums = cluster_sums(table, rounds=rounds, seed=seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            shares = sums / sums.sum(axis=1, keepdims=True)
        intervals = [
            percentile_interval(
                float(estimates[j]),
                shares[:, j],
                confidence=confidence,
                seed=seed,
                clusters=n_clusters,
            )
            for j in range(k)
        ]
        ends = [(i.lower, i.upper) for i in intervals]
        ran = rounds
    else:
        ends = [(math.nan, math.nan)] * k
        ran = 0
    return LevelShares(
        total=total,
        clusters=n_clusters,
        rounds=ran,
        confidence=confidence,
        resampled=resampled,
        levels=[
            LevelShare(level, int(counts[j]), total, float(estimates[j]), *ends[j])
            for j, level in enumerate(levels)
        ],
    )


def preferred_rated_higher(
    preference: Sequence[str] | npt.ArrayLike,
    score_a: Sequence[float] | npt.ArrayLike,
    score_b: Sequence[float] | npt.ArrayLike,
) -> npt.NDArray[np.object_]:
    """For each judgment, whether the answer it prefers got the higher rating: "higher",
    "lower", or None when it does not count.

    ``preference[i]`` is "A", "B" or "tie"; ``score_a[i]`` and ``score_b[i]`` are the same
    rater's ratings of the two answers on one ordered scale (no = 0 < partial = 1 < yes = 2; for
    acceptability, accepted = 1 and not accepted = 0, so that "higher" means the preferred
    answer is the accepted one). A judgment counts when it prefers one answer and rates the two
    differently (NaN: not rated): "higher" when the preferred answer's rating is above the
    other's. The share of "higher" among the counted judgments is how often the preferred
    answer is the better-rated one; a preference that ignored the ratings would give 1/2.
    """
    pref = np.asarray(preference, dtype=object)
    a = np.asarray(score_a, dtype=np.float64)
    b = np.asarray(score_b, dtype=np.float64)
    if not (pref.shape == a.shape == b.shape) or pref.ndim != 1:
        raise ValueError("preference and the two scores must be 1-D and of one length")
    preferred = np.where(pref == "A", a, np.where(pref == "B", b, np.nan))
    other = np.where(pref == "A", b, np.where(pref == "B", a, np.nan))
    out = np.full(pref.shape, None, dtype=object)
    with np.errstate(invalid="ignore"):
        out[preferred > other] = "higher"
        out[preferred < other] = "lower"
    return out
