"""Agreement with people per dollar: the crowd's own agreement by held-out raters, a source's
cost per 1,000 pairs, and the sources no other beats on both (the Pareto front)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from leaderboard.stats.majority import LABELS

if TYPE_CHECKING:
    import pandas as pd


def held_out_hits(
    votes: pd.DataFrame, *, key: str = "pair_id", label: str = "label"
) -> pd.DataFrame:
    """Return, per vote on a unit with two or more votes, whether it names the other votes'
    majority.

    The crowd's agreement with people measured as a judge's is: each rater in turn is held out
    and compared with the majority of the unit's other votes (the unique most common of A, B and
    tie; a tied count is a tie, :func:`leaderboard.stats.majority.people_majority`'s rule), so
    no vote is compared with a majority it is part of. Source: the leave-one-out ("held-out
    rater") agreement of MT-Bench (Zheng et al. 2023, section 4.2, human-human agreement) read
    against the majority. Returns the votes' ``key`` and ``hit`` columns, in the votes' order,
    for units with 2+ labelled votes.
    """
    import pandas as pd

    codes = pd.Categorical(votes[label], categories=LABELS).codes.astype(np.int64)
    known = codes >= 0
    kept = votes[known]
    codes = codes[known]
    unit, units = pd.factorize(kept[key], sort=True)
    counts = np.bincount(unit * 3 + codes, minlength=3 * len(units)).reshape(len(units), 3)
    others = counts[unit].copy()
    others[np.arange(len(codes)), codes] -= 1
    enough = others.sum(axis=1) >= 1
    top = others.max(axis=1, keepdims=True)
    unique = (others == top).sum(axis=1) == 1
    tie = LABELS.index("tie")
    majority = np.where(unique, others.argmax(axis=1), tie)
    return pd.DataFrame(
        {key: kept[key].to_numpy()[enough], "hit": (majority == codes)[enough]}
    ).reset_index(drop=True)


def pareto_front(cost: npt.ArrayLike, agreement: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Return which points no other point dominates: none costs no more and agrees no less,
    with one of the two strictly. A point with an unknown cost or agreement (NaN) is on no
    front and dominates nothing. Source: the Pareto (efficiency) frontier of a cost-quality
    trade-off, as "Replacing Judges with Juries" (Verga et al. 2024) plots judges by cost."""
    c = np.asarray(cost, dtype=np.float64)
    a = np.asarray(agreement, dtype=np.float64)
    known = ~(np.isnan(c) | np.isnan(a))
    front = np.zeros(c.size, dtype=bool)
    for i in np.flatnonzero(known):
        others = known.copy()
        others[i] = False
        dominated = others & (c <= c[i]) & (a >= a[i]) & ((c < c[i]) | (a > a[i]))
        front[i] = not dominated.any()
    return front
