"""Ranking a question's answers against their gold order: AdvisorQA's Table 3 measures.

Each list is one question's answers in gold order, best first, with a ranker's scores for them
(higher = better). The measures, averaged over lists (Kim et al. 2024, "AdvisorQA", Table 3):

- NDCG@k (:func:`leaderboard.stats.ranking.ndcg_at_k`, linear gain) with graded relevance
  ``n - position`` for a list of n answers (best = n, last = 1), so every answer counts and
  the order among them decides the score;
- first-vs-second accuracy: the share of lists whose 1st answer scores above the 2nd;
- first-vs-last accuracy: the share whose 1st answer scores above the last.

A tie between the two scores counts half (a ranker that cannot tell them apart is right half
the time). NDCG@k is averaged over the lists with at least k answers; lists with fewer answers
are left out of that column, and the counts say how many lists each column used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.stats.ranking import ndcg_at_k

TABLE_KS = (2, 3, 5)


@dataclass(frozen=True)
class ListwiseScores:
    """AdvisorQA's Table 3 row of one ranker: NDCG@k for k in ``ks``, two accuracies, counts."""

    ndcg: dict[int, float]
    ndcg_lists: dict[int, int]
    first_vs_second: float
    first_vs_last: float
    lists: int


def _beats(first: float, other: float) -> float:
    if first > other:
        return 1.0
    return 0.5 if first == other else 0.0


def listwise_scores(
    lists: Sequence[npt.ArrayLike], *, ks: Sequence[int] = TABLE_KS
) -> ListwiseScores:
    """The Table 3 measures of a ranker from its scores of lists given in gold order.

    Lists with fewer than two answers are skipped. NaN where no list qualifies.
    """
    rows = [np.asarray(scores, dtype=np.float64) for scores in lists]
    rows = [row for row in rows if row.ndim == 1 and row.size >= 2]
    ndcg: dict[int, float] = {}
    counts: dict[int, int] = {}
    for k in ks:
        values = [
            ndcg_at_k(row, np.arange(row.size, 0, -1, dtype=np.float64), k)
            for row in rows
            if row.size >= k
        ]
        counts[k] = len(values)
        ndcg[k] = float(np.mean(values)) if values else math.nan
    second = [_beats(row[0], row[1]) for row in rows]
    last = [_beats(row[0], row[-1]) for row in rows]
    return ListwiseScores(
        ndcg=ndcg,
        ndcg_lists=counts,
        first_vs_second=float(np.mean(second)) if rows else math.nan,
        first_vs_last=float(np.mean(last)) if rows else math.nan,
        lists=len(rows),
    )


def wins_scores(size: int, verdicts: Sequence[tuple[int, int, float]]) -> np.ndarray:
    """Scores of a list's answers from pairwise verdicts: each answer's wins, a tie half a win.

    ``verdicts`` holds (i, j, p) with positions i, j in the list and p the share of the
    comparison won by j (1 = j better, 0 = i better, 0.5 = tie). This is how a pairwise judge
    (an LLM judge, people) ranks a list (Copeland-style counting of wins).
    """
    wins = np.zeros(size, dtype=np.float64)
    for i, j, p in verdicts:
        wins[j] += p
        wins[i] += 1.0 - p
    return wins


def random_scores(sizes: Sequence[int], *, seed: int) -> list[np.ndarray]:
    """Uniform random scores for lists of the given sizes: the random ranker, seeded."""
    rng = np.random.default_rng(seed)
    return [rng.random(size) for size in sizes]
