"""Correlation coefficients with their sample size and confidence interval."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Method = Literal["pearson", "spearman", "kendall"]

# Variance of Fisher's z for each coefficient, as (numerator, n offset): var = c / (n - o).
# Pearson: 1/(n-3) (Fisher 1921). Spearman: 1.06/(n-3) and Kendall's tau-b: 0.437/(n-4),
# from Fieller, Hartley & Pearson (1957), Biometrika 44:470-481.
_Z_VARIANCE = {"pearson": (1.0, 3), "spearman": (1.06, 3), "kendall": (0.437, 4)}


NO_CORRELATION = "no correlation: fewer than 3 pairs or a constant variable"


@dataclass(frozen=True)
class Correlation:
    """A correlation estimate on ``n`` complete pairs with its two-sided interval and p-value."""

    method: Method
    estimate: float
    n: int
    lower: float
    upper: float
    p_value: float
    confidence: float
    # How the interval was made ("fisher-z", "prompt bootstrap") or why there is none
    # ("too few systems for an interval"), and how the p-value was ("asymptotic" from scipy, or
    # "exact permutation").
    interval: str = "fisher-z"
    p_method: str = "asymptotic"


def correlation(
    x: npt.ArrayLike, y: npt.ArrayLike, method: Method = "pearson", *, confidence: float = 0.95
) -> Correlation:
    """Return Pearson's r, Spearman's rho or Kendall's tau-b with a Fisher-z interval.

    Estimates and p-values come from scipy.stats (pearsonr, spearmanr, kendalltau with tau-b for
    ties). Interval: ``z = atanh(estimate)``, ``tanh(z ± q · sqrt(var))`` with ``q`` the normal
    quantile and ``var`` = 1/(n-3) for Pearson (R. A. Fisher 1921, "On the probable error of a
    coefficient of correlation deduced from a small sample", Metron 1:3-32), 1.06/(n-3) for
    Spearman and 0.437/(n-4) for Kendall (E. C. Fieller, H. O. Hartley & E. S. Pearson 1957,
    "Tests for rank correlation coefficients. I", Biometrika 44:470-481). The rank intervals are
    large-sample approximations; they assume no heavy ties.

    Pairs where either value is NaN are left out; ``n`` counts the pairs used. Degenerate input
    gives NaN fields rather than an error: fewer than 3 pairs, or a constant variable. The
    interval is NaN when ``n`` is at or below the variance offset (3, or 4 for Kendall), and
    (±1, ±1) when the estimate is exactly ±1.
    """
    from scipy import stats as _st

    if method not in _Z_VARIANCE:
        raise ValueError(f"method must be one of {tuple(_Z_VARIANCE)}")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be 1-D and of equal length")
    complete = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys = xs[complete], ys[complete]
    n = int(xs.size)
    nan = math.nan
    if n < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return Correlation(
            method, nan, n, nan, nan, nan, confidence, interval=NO_CORRELATION, p_method="none"
        )
    if method == "pearson":
        estimate, p_value = _st.pearsonr(xs, ys)
    elif method == "spearman":
        estimate, p_value = _st.spearmanr(xs, ys)
    else:
        estimate, p_value = _st.kendalltau(xs, ys)
    estimate, p_value = float(estimate), float(p_value)
    if abs(estimate) > 1.0 - 1e-12:
        # Rounding leaves a perfect correlation at 0.9999999999999999; call it what it is.
        estimate = math.copysign(1.0, estimate)
    numerator, offset = _Z_VARIANCE[method]
    interval = "fisher-z"
    if n <= offset:
        lower = upper = nan
        interval = "too few pairs for an interval"
    elif abs(estimate) >= 1.0:
        lower = upper = math.copysign(1.0, estimate)
    else:
        q = float(_st.norm.ppf(0.5 + confidence / 2.0))
        z = math.atanh(estimate)
        half = q * math.sqrt(numerator / (n - offset))
        lower, upper = math.tanh(z - half), math.tanh(z + half)
    return Correlation(method, estimate, n, lower, upper, p_value, confidence, interval=interval)


# Below this many items a rank correlation gets no interval (the Fisher-z approximation needs a
# large sample and gives [1, 1] at a perfect correlation) and its p-value is exact.
FEW_ITEMS = 10


def exact_permutation_p(x: npt.ArrayLike, y: npt.ArrayLike, method: Method) -> float:
    """Two-sided exact permutation p-value of Spearman's rho or Kendall's tau-b of x and y.

    Under the null of no association every one of the n! pairings of x with a permutation of y
    is equally likely; p = #{permutations with |stat| >= |observed|} / n! (with a 1e-12
    tolerance for rounding). Exact for any n and any ties (M. G. Kendall 1938, "A new measure of
    rank correlation", Biometrika 30:81-93; E. J. G. Pitman 1937, "Significance tests which
    may be applied to samples from any populations. II. The correlation coefficient test", JRSS
    Suppl. 4:225-232). Enumerates all n! orders, so n is at most 9 (362,880 orders).
    """
    from scipy import stats as _st

    xs = _st.rankdata(np.asarray(x, dtype=np.float64))
    ys = _st.rankdata(np.asarray(y, dtype=np.float64))
    n = int(xs.size)
    if n != ys.size or n < 2:
        raise ValueError("need two samples of one length, at least 2")
    if n > 9:
        raise ValueError("exact enumeration is for at most 9 items")
    orders = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    permuted = ys[orders]  # each row: y's ranks in one order
    if method == "spearman":
        xc = xs - xs.mean()
        yc = permuted - ys.mean()
        denom = math.sqrt(float((xc**2).sum()) * float(((ys - ys.mean()) ** 2).sum()))
        stat = (yc @ xc) / denom
        observed = float(xc @ (ys - ys.mean())) / denom
    elif method == "kendall":
        i, j = np.triu_indices(n, 1)
        sx = np.sign(xs[i] - xs[j])
        sy = np.sign(permuted[:, i] - permuted[:, j])
        ties_x = float((sx != 0).sum())
        ties_y = float((np.sign(ys[i] - ys[j]) != 0).sum())  # the same in every order
        denom = math.sqrt(ties_x * ties_y)
        stat = (sy @ sx) / denom
        observed = float(np.sign(ys[i] - ys[j]) @ sx) / denom
    else:
        raise ValueError("exact permutation p-values are for spearman or kendall")
    return float((np.abs(stat) >= abs(observed) - 1e-12).mean())


def rank_correlation_few(
    x: npt.ArrayLike, y: npt.ArrayLike, method: Method, *, confidence: float = 0.95
) -> Correlation:
    """Spearman's rho or Kendall's tau-b over a few items (systems of two leaderboards).

    The estimate is :func:`correlation`'s. With fewer than FEW_ITEMS (10) complete pairs there
    is no interval (NaN ends; ``interval`` says "too few systems for an interval"): Fisher's z
    is a large-sample approximation (on 6 systems a perfect ranking reads [1, 1]); the p-value
    is then the exact permutation one (:func:`exact_permutation_p`). From 10 pairs on, as
    :func:`correlation`.
    """
    base = correlation(x, y, method, confidence=confidence)
    if base.n >= FEW_ITEMS or math.isnan(base.estimate):
        return base
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    complete = ~(np.isnan(xs) | np.isnan(ys))
    return Correlation(
        method,
        base.estimate,
        base.n,
        math.nan,
        math.nan,
        exact_permutation_p(xs[complete], ys[complete], method),
        confidence,
        interval="too few systems for an interval",
        p_method="exact permutation",
    )


def _weighted_pearson(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Pearson's r of x and y with integer weights (copies), one r per row of ``w`` (x and y
    may be per row too): r = (S S_xy - S_x S_y) / sqrt((S S_xx - S_x^2)(S S_yy - S_y^2))."""
    total = w.sum(axis=-1)
    sx, sy = (w * x).sum(axis=-1), (w * y).sum(axis=-1)
    sxx, syy, sxy = (w * x * x).sum(axis=-1), (w * y * y).sum(axis=-1), (w * x * y).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (total * sxy - sx * sy) / np.sqrt((total * sxx - sx**2) * (total * syy - sy**2))
    return np.asarray(np.clip(r, -1.0, 1.0), dtype=np.float64)


def _weighted_midranks(x: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> Any:
    """Each item's mid-rank in the sample that repeats item i w[r, i] times, one row per round:
    the rank ``scipy.stats.rankdata`` gives every copy (ties share the mean of their places)."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    group_of_sorted = np.cumsum(np.r_[True, sorted_x[1:] != sorted_x[:-1]]) - 1
    group = np.empty_like(group_of_sorted)
    group[order] = group_of_sorted
    sizes = np.add.reduceat(w[:, order], starts, axis=1)  # copies per value, per round
    before = np.cumsum(sizes, axis=1) - sizes
    midrank = before + (sizes + 1.0) / 2.0
    return midrank[:, group]


def correlation_over_clusters(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    clusters: npt.ArrayLike,
    method: Literal["pearson", "spearman"],
    *,
    rounds: int,
    seed: int,
    confidence: float = 0.95,
) -> Correlation:
    """Pearson's r or Spearman's rho with a bootstrap percentile interval over clusters.

    The estimate and p-value are :func:`correlation`'s. A round draws the C clusters (prompts)
    C times with replacement and takes every unit of each drawn cluster, as often as it was
    drawn (``rng = numpy.random.default_rng(seed)``, ``rng.integers(0, C, (rounds, C))``); the
    round's coefficient is Pearson's r of the repeated sample, or Spearman's rho: Pearson's r of
    its mid-ranks, ties sharing the mean of their places (as ``scipy.stats.spearmanr`` ranks
    the repeated sample). The interval is the percentiles of the rounds (Efron & Tibshirani
    1993, ch. 13; the cluster bootstrap of section 8.5). Unlike Fisher's z it assumes neither a
    large sample nor few ties, which per-category unit scores (means of a few Likert votes)
    have in plenty; rounds with a constant variable are skipped. Fewer than two clusters: no
    interval.
    """
    base = correlation(x, y, method, confidence=confidence)
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    labels = np.asarray(clusters)
    if labels.shape != xs.shape:
        raise ValueError("need one cluster per item")
    complete = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys, labels = xs[complete], ys[complete], labels[complete]
    codes = np.unique(labels, return_inverse=True)[1].reshape(-1)
    n_clusters = int(codes.max()) + 1 if codes.size else 0
    if math.isnan(base.estimate) or n_clusters < 2:
        return dataclasses.replace(
            base, lower=math.nan, upper=math.nan, interval="too few prompts for an interval"
        )
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_clusters, size=(rounds, n_clusters))
    drawn = np.zeros((rounds, n_clusters))
    for row in range(rounds):
        drawn[row] = np.bincount(picks[row], minlength=n_clusters)
    weights = drawn[:, codes]
    if method == "pearson":
        values = _weighted_pearson(xs, ys, weights)
    else:
        values = _weighted_pearson(
            _weighted_midranks(xs, weights), _weighted_midranks(ys, weights), weights
        )
    finite = values[np.isfinite(values)]
    tail = (1.0 - confidence) / 2.0
    lower, upper = (
        (float(v) for v in np.quantile(finite, [tail, 1.0 - tail]))
        if finite.size
        else (math.nan, math.nan)
    )
    return dataclasses.replace(base, lower=lower, upper=upper, interval="prompt bootstrap")
