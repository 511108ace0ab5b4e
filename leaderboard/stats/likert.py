"""Likert 1-8 on arrays: the conventions of core.conventions (the scale, its mirror and its
collapse, written once there), applied to whole columns of scores.

1 means the first answer (left, or A) is much better, 8 means the second is much better; 4 and 5
are the two sides of "about equal". The scale and its collapse follow the Hugging Face H4 study
"Can foundation models label data like humans?" (Rajani et al., 2023).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from core.conventions import (
    LIKERT_MAX,
    LIKERT_MIN,
    LIKERT_SCORES,
    PREFERENCES,
    Preference,
    likert_collapse,
)

__all__ = ["LIKERT_MAX", "LIKERT_MIN", "PREFERENCES", "Preference"]

# likert_collapse of every score, indexed by score - LIKERT_MIN: the rule stays in one place and
# a column is collapsed by one lookup.
_COLLAPSED = {
    ties: np.array([likert_collapse(s, ties=ties) for s in LIKERT_SCORES], dtype="<U3")
    for ties in (True, False)
}


def as_likert_scores(scores: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Return the scores as integers, raising ValueError unless each is a whole number in 1-8."""
    arr = np.asarray(scores)
    if arr.size and not np.issubdtype(arr.dtype, np.number):
        raise ValueError("Likert scores must be numbers")
    as_int = arr.astype(np.int64)
    if not np.array_equal(as_int, arr):
        raise ValueError("Likert scores must be whole numbers")
    if as_int.size and (as_int.min() < LIKERT_MIN or as_int.max() > LIKERT_MAX):
        raise ValueError(f"Likert scores must lie in {LIKERT_MIN}..{LIKERT_MAX}")
    return as_int


def canonical_score(shown: npt.ArrayLike, a_left: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Return the Likert score in canonical A/B terms.

    Formula: ``canonical = shown`` when A was shown on the left, ``canonical = 9 - shown`` when B
    was on the left (the 1-8 scale is mirrored). Source: Concord DESIGN.md conventions, after the
    H4 study's blind left/right presentation.
    """
    scores = as_likert_scores(shown)
    left = np.asarray(a_left, dtype=bool)
    return np.where(left, scores, (LIKERT_MIN + LIKERT_MAX) - scores)


def collapse(scores: npt.ArrayLike, *, ties: bool = True) -> npt.NDArray[np.str_]:
    """Collapse Likert 1-8 scores into preferences "A", "B" (and "tie").

    With ties: 1-3 = A, 4-5 = tie, 6-8 = B. Without ties: 1-4 = A, 5-8 = B. Source: the H4 study's
    collapse of its 1-8 scale, as written in Concord DESIGN.md (core.conventions.likert_collapse,
    applied element-wise). Works on shown or canonical scores; for shown scores "A" reads as
    "first shown".
    """
    s = as_likert_scores(scores)
    return _COLLAPSED[ties][s - LIKERT_MIN]


def preference_sign(preferences: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Map preferences to signed numbers: A = -1, tie = 0, B = +1.

    Used to correlate a preference with a signed covariate (for example ``len_b - len_a``), so that
    a positive correlation means "prefers B when B is larger".
    """
    import pandas as pd

    # Factorised first (a Categorical by its codes), so each distinct label is checked once.
    values = (
        preferences
        if isinstance(preferences, pd.Series | pd.Categorical)
        else np.asarray(preferences, dtype=object)
    )
    codes, seen = pd.factorize(values)
    labels = [str(v) for v in seen.tolist()]
    unknown = set(labels) - set(PREFERENCES)
    if (codes < 0).any():
        unknown.add("None")
    if unknown:
        raise ValueError(f"unknown preference labels: {sorted(unknown)}")
    signs = {"A": -1.0, "B": 1.0, "tie": 0.0}
    lookup = np.array([signs[label] for label in labels], dtype=np.float64)
    return lookup[codes] if len(labels) else np.zeros(len(codes), dtype=np.float64)
