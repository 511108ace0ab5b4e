"""Correlation coefficients with their sample size and confidence interval."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

Method = Literal["pearson", "spearman", "kendall"]

# Variance of Fisher's z for each coefficient, as (numerator, n offset): var = c / (n - o).
# Pearson: 1/(n-3) (Fisher 1921). Spearman: 1.06/(n-3) and Kendall's tau-b: 0.437/(n-4),
# from Fieller, Hartley & Pearson (1957), Biometrika 44:470-481.
_Z_VARIANCE = {"pearson": (1.0, 3), "spearman": (1.06, 3), "kendall": (0.437, 4)}


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
        return Correlation(method, nan, n, nan, nan, nan, confidence)
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
    if n <= offset:
        lower = upper = nan
    elif abs(estimate) >= 1.0:
        lower = upper = math.copysign(1.0, estimate)
    else:
        q = float(_st.norm.ppf(0.5 + confidence / 2.0))
        z = math.atanh(estimate)
        half = q * math.sqrt(numerator / (n - offset))
        lower, upper = math.tanh(z - half), math.tanh(z + half)
    return Correlation(method, estimate, n, lower, upper, p_value, confidence)
