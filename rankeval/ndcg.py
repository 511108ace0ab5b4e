"""NDCG@k of a ranking against gold relevances."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt


def ndcg_at_k(
    scores: npt.ArrayLike,
    relevances: npt.ArrayLike,
    k: int | None = None,
    *,
    gain: Literal["linear", "exponential"] = "linear",
) -> float:
    """Return NDCG@k of the ranking given by ``scores`` (higher first) against gold relevances.

    Formula: ``DCG@k = sum_{i=1..k} g(rel_i) / log2(i + 1)`` over the items in score order,
    ``NDCG@k = DCG@k / IDCG@k`` with IDCG the DCG of the items sorted by relevance;
    ``g(r) = r`` ("linear", K. Järvelin & J. Kekäläinen 2002, "Cumulated gain-based evaluation of
    IR techniques", ACM TOIS 20:422-446) or ``2**r - 1`` ("exponential", C. Burges et al. 2005,
    "Learning to rank using gradient descent", ICML). AdvisorQA (Kim et al. 2024) scores its
    Plackett-Luce model with NDCG against upvote rankings.

    Tie rule (the only one in Concord): items with equal scores share the mean discount of the
    positions they span, positions past k discounting 0 (F. McSherry & M. Najork 2008, "Computing
    information retrieval performance measures efficiently in the presence of tied scores", ECIR),
    which equals the mean NDCG over every order of the tied items: ties neither help nor hurt.
    ``k=None`` uses all items, and a k beyond the list's length is cut to it (NDCG@5 of four
    items is their NDCG@4), scikit-learn's convention (``sklearn.metrics.ndcg_score``, whose
    ``ignore_ties=False`` is this tie rule too). Degenerate input: NaN when there are no items
    or every gold relevance is 0 (IDCG 0).
    """
    s = np.asarray(scores, dtype=np.float64)
    rel = np.asarray(relevances, dtype=np.float64)
    if s.shape != rel.shape or s.ndim != 1:
        raise ValueError("scores and relevances must be 1-D and of equal length")
    if k is not None and k < 1:
        raise ValueError("k must be at least 1")
    if (rel < 0).any():
        raise ValueError("relevances must be non-negative")
    n = s.size
    depth = n if k is None else min(k, n)
    if depth == 0:
        return math.nan
    gains = rel if gain == "linear" else np.exp2(rel) - 1.0
    discount = np.zeros(n)
    discount[:depth] = 1.0 / np.log2(np.arange(2, depth + 2))
    idcg = float((np.sort(gains)[::-1] * discount).sum())
    if idcg == 0.0:
        return math.nan
    order = np.argsort(-s, kind="stable")
    sorted_scores, sorted_gains = s[order], gains[order]
    # Runs of equal scores: each run's gains times the mean discount over its positions.
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], n]
    dcg = sum(
        float(sorted_gains[a:b].sum() * discount[a:b].mean())
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
    )
    return dcg / idcg
