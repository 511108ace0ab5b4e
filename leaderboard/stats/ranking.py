"""Agreement of two leaderboards (NDCG@k, shared with the reward model, is `rankeval.ndcg`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from leaderboard.stats.correlation import Correlation, rank_correlation_few

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman and Kendall correlation of two leaderboards over the models they share."""

    spearman: Correlation
    kendall: Correlation
    models: tuple[str, ...]


def rank_correlation(
    ratings_a: Mapping[str, float] | pd.Series, ratings_b: Mapping[str, float] | pd.Series
) -> RankCorrelation:
    """Return Spearman's rho and Kendall's tau-b between two leaderboards' ratings.

    Only models present (with a non-NaN rating) in both leaderboards are compared; their names are
    returned in ``models``. Formulas and intervals as :func:`correlation` (Spearman 1904; Kendall
    1938, tau-b for ties); with fewer than FEW_ITEMS (10) models there is no interval ("too few
    systems for an interval") and the p-value is the exact permutation one
    (:func:`leaderboard.stats.correlation.rank_correlation_few`). Used to ask whether a judge
    ranks models the way people do (H4 study, Chatbot Arena vs MT-Bench in Zheng et al. 2023).
    """
    import pandas as pd

    a = pd.Series(ratings_a, dtype="float64").dropna()
    b = pd.Series(ratings_b, dtype="float64").dropna()
    common = sorted(set(a.index) & set(b.index))
    xs = a.loc[common].to_numpy()
    ys = b.loc[common].to_numpy()
    return RankCorrelation(
        spearman=rank_correlation_few(xs, ys, "spearman"),
        kendall=rank_correlation_few(xs, ys, "kendall"),
        models=tuple(str(m) for m in common),
    )
