"""A counted share with its binomial confidence interval."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Proportion:
    """``count`` successes out of ``total``; ``share`` and the interval are None when total is 0."""

    count: int
    total: int
    share: float | None
    lower: float | None
    upper: float | None
    confidence: float


def wilson_interval(count: int, total: int, confidence: float = 0.95) -> Proportion:
    """Return the share ``count / total`` with its Wilson score interval.

    Formula: with ``p = k/n`` and ``z`` the two-sided normal quantile,
    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``.
    Source: E. B. Wilson (1927), "Probable inference, the law of succession, and statistical
    inference", JASA 22:209-212; recommended by Brown, Cai & DasGupta (2001), Stat. Sci. 16:101.
    """
    from scipy import stats as _st

    if total < 0 or count < 0 or count > total:
        raise ValueError("need 0 <= count <= total")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    if total == 0:
        return Proportion(count, total, None, None, None, confidence)
    z = float(_st.norm.ppf(0.5 + confidence / 2.0))
    p = count / total
    denom = 1.0 + z * z / total
    centre = (p + z * z / (2.0 * total)) / denom
    half = z * math.sqrt(p * (1.0 - p) / total + z * z / (4.0 * total * total)) / denom
    return Proportion(count, total, p, max(0.0, centre - half), min(1.0, centre + half), confidence)
