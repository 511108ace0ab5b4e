"""Position bias and length bias of a judge (human or automatic)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.stats.correlation import Correlation, correlation
from leaderboard.stats.likert import (
    LIKERT_MAX,
    LIKERT_MIN,
    PREFERENCES,
    as_likert_scores,
    preference_sign,
)
from leaderboard.stats.proportion import Proportion, wilson_interval


@dataclass(frozen=True)
class PositionBias:
    """Histogram of shown Likert scores and the share of preferences for the first-shown answer."""

    histogram: dict[int, int]
    prefers_first: Proportion


@dataclass(frozen=True)
class LengthBias:
    """Share of decisive judgments preferring the longer answer, and the signed correlation."""

    prefers_longer: Proportion
    correlation: Correlation


def position_bias(
    shown_scores: npt.ArrayLike, *, ties: bool = False, confidence: float = 0.95
) -> PositionBias:
    """Return the histogram of shown Likert 1-8 scores and the share preferring the first shown.

    Computed from the scores as shown (left = first), never from canonical scores.
    ``ties=False``: every judgment counts; 1-4 prefer the first answer, share = #(1-4) / n.
    ``ties=True``: 4-5 are ties and left out; share = #(1-3) / #(1-3 or 6-8).
    An unbiased judge on counterbalanced pairs has a share near 1/2. Interval: Wilson score
    (Wilson 1927). Source: the H4 study "Can foundation models label data like humans?" (2023)
    shows GPT-4's position bias as this histogram; Zheng et al. (2023) section 3.3.
    """
    scores = as_likert_scores(shown_scores)
    counts = np.bincount(scores, minlength=LIKERT_MAX + 1)
    histogram = {s: int(counts[s]) for s in range(LIKERT_MIN, LIKERT_MAX + 1)}
    if ties:
        first, total = int(counts[1:4].sum()), int(counts[1:4].sum() + counts[6:9].sum())
    else:
        first, total = int(counts[1:5].sum()), int(scores.size)
    return PositionBias(histogram, wilson_interval(first, total, confidence))


def flip_rate(
    first_order: npt.ArrayLike, second_order: npt.ArrayLike, *, confidence: float = 0.95
) -> Proportion:
    """Return the share of pairs whose canonical preference changes when the order is swapped.

    ``first_order[i]`` and ``second_order[i]`` are the judge's canonical preferences ("A", "B",
    "tie") on pair ``i`` judged with A first and with B first. Formula: #(first != second) / n,
    with a Wilson interval (Wilson 1927), for pairs that are independent; the report's interval
    resamples prompts over :func:`flips` instead. A consistent judge flips on none; a judge that
    always picks the first-shown answer flips on every pair where it is decisive. Source: Zheng
    et al. (2023), "Judging LLM-as-a-Judge", section 3.3 and Table 2 (position consistency).
    """
    flipped = flips(first_order, second_order)
    return wilson_interval(int(flipped.sum()), int(flipped.size), confidence)


def flips(first_order: npt.ArrayLike, second_order: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Per pair, whether its canonical preference changed when the order was swapped
    (``first_order[i] != second_order[i]``, :func:`flip_rate`'s hits); labels outside
    PREFERENCES raise ValueError."""
    import pandas as pd

    first = np.asarray(first_order)
    second = np.asarray(second_order)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError("both orders must be 1-D and of equal length")
    # The values outside PREFERENCES, found by one element-wise comparison per preference (no
    # Python object per element, no hash, when the labels come as a numpy string array).
    outside = [
        values[~np.logical_or.reduce([values == p for p in PREFERENCES])] if values.size else values
        for values in (first, second)
    ]
    found = [pd.unique(np.asarray(values).ravel()) for values in outside]
    unknown = set(np.concatenate(found).tolist()) - set(PREFERENCES)
    if unknown:
        raise ValueError(f"preferences must be in {PREFERENCES}; found {sorted(map(str, unknown))}")
    return np.asarray(first != second, dtype=bool)


def length_bias(
    length_a: npt.ArrayLike,
    length_b: npt.ArrayLike,
    preference: npt.ArrayLike,
    *,
    confidence: float = 0.95,
) -> LengthBias:
    """Return how often the longer answer is preferred, and how preference follows length.

    ``preference`` holds canonical "A" / "B" / "tie". Share: among judgments that are decisive
    and whose answers differ in length, #(preferred answer is the longer) / n, with a Wilson
    interval for independent judgments (the report resamples prompts over
    :func:`prefers_longer`'s hits instead); an indifferent judge is near 1/2. Correlation:
    Spearman between ``len_b - len_a`` and the signed preference (A = -1, tie = 0, B = +1) over
    all judgments; positive means longer answers are preferred (:func:`correlation`). Source:
    verbosity bias in Zheng et al. (2023), section 3.3; Saito et al. (2023), "Verbosity bias in
    preference labeling by large language models".
    """
    decisive, longer = prefers_longer(length_a, length_b, preference)
    share = wilson_interval(int(longer[decisive].sum()), int(decisive.sum()), confidence)
    diff = np.asarray(length_b, dtype=np.float64) - np.asarray(length_a, dtype=np.float64)
    sign = preference_sign(preference)
    return LengthBias(share, correlation(diff, sign, "spearman", confidence=confidence))


def prefers_longer(
    length_a: npt.ArrayLike, length_b: npt.ArrayLike, preference: npt.ArrayLike
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per judgment, whether it counts (``decisive``: not a tie, answers of different lengths)
    and whether it prefers the longer answer (``longer``; False where it does not count), the
    hits of :func:`length_bias`'s share, for an interval over their prompts."""
    la = np.asarray(length_a, dtype=np.float64)
    lb = np.asarray(length_b, dtype=np.float64)
    sign = preference_sign(preference)
    if not la.shape == lb.shape == sign.shape or la.ndim != 1:
        raise ValueError("lengths and preferences must be 1-D and of equal length")
    diff = lb - la
    decisive = (sign != 0) & (diff != 0)
    return decisive, decisive & (np.sign(diff) == sign)
