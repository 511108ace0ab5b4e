"""Ranking a question's answers against their gold order: AdvisorQA's Table 3 measures.

Each list is one question's answers in gold order, best first, with a ranker's scores for them
(higher = better). The measures, averaged over lists (Kim et al. 2024, "AdvisorQA", Table 3):

- NDCG@k (:func:`rankeval.ndcg.ndcg_at_k`, linear gain) with graded relevance
  ``n - position`` for a list of n answers (best = n, last = 1), so every answer counts and
  the order among them decides the score;
- first-vs-second accuracy: the share of lists whose 1st answer scores above the 2nd;
- first-vs-last accuracy: the share whose 1st answer scores above the last.

A tie between the two scores counts half (a ranker that cannot tell them apart is right half
the time): the one tie rule of this table, said where it is shown.

NDCG@k of a list shorter than k is its NDCG over all its answers: k is cut to the list's length,
as scikit-learn's ``sklearn.metrics.ndcg_score`` does (its ``k`` keeps the top min(k, n)), so
NDCG@5 of 4-answer lists is their NDCG@4, not empty. ``short_lists="skip"`` keeps the older
rule (a list with fewer than k answers is left out of the NDCG@k column); the counts say how
many lists each column used and how many of them were cut.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from rankeval.ndcg import ndcg_at_k

TABLE_KS = (2, 3, 5)


@dataclass(frozen=True)
class ListwiseScores:
    """AdvisorQA's Table 3 row of one ranker: NDCG@k for k in ``ks``, two accuracies, counts."""

    ndcg: dict[int, float]
    ndcg_lists: dict[int, int]
    first_vs_second: float
    first_vs_last: float
    lists: int
    # Lists of the NDCG@k column shorter than k (their k cut to their length); 0 under "skip".
    ndcg_cut: dict[int, int] = dataclasses.field(default_factory=dict)


def _beats(first: float, other: float) -> float:
    if first > other:
        return 1.0
    return 0.5 if first == other else 0.0


def listwise_scores(
    lists: Sequence[npt.ArrayLike],
    *,
    ks: Sequence[int] = TABLE_KS,
    short_lists: Literal["cut", "skip"] = "cut",
) -> ListwiseScores:
    """The Table 3 measures of a ranker from its scores of lists given in gold order.

    Lists with fewer than two answers are skipped. NDCG@k of a list shorter than k: k cut to its
    length (``"cut"``, scikit-learn's convention) or the list left out (``"skip"``). NaN where
    no list qualifies.
    """
    if short_lists not in ("cut", "skip"):
        raise ValueError(f"short_lists is 'cut' or 'skip', not {short_lists!r}")
    rows = [np.asarray(scores, dtype=np.float64) for scores in lists]
    rows = [row for row in rows if row.ndim == 1 and row.size >= 2]
    ndcg: dict[int, float] = {}
    counts: dict[int, int] = {}
    cut: dict[int, int] = {}
    for k in ks:
        used = [row for row in rows if short_lists == "cut" or row.size >= k]
        values = [ndcg_at_k(row, np.arange(row.size, 0, -1, dtype=np.float64), k) for row in used]
        counts[k] = len(values)
        cut[k] = sum(1 for row in used if row.size < k)
        ndcg[k] = float(np.mean(values)) if values else math.nan
    second = [_beats(row[0], row[1]) for row in rows]
    last = [_beats(row[0], row[-1]) for row in rows]
    return ListwiseScores(
        ndcg=ndcg,
        ndcg_lists=counts,
        first_vs_second=float(np.mean(second)) if rows else math.nan,
        first_vs_last=float(np.mean(last)) if rows else math.nan,
        lists=len(rows),
        ndcg_cut=cut,
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


@dataclass(frozen=True)
class TableRow:
    """One row of AdvisorQA's Table 3: a source, how it ranks, and the measures.

    ``ranking`` is "scores" (a scorer such as a PL model), "wins" (a pairwise judge or people:
    answers ranked by wins, :func:`wins_scores`), "length" or "random". For "wins" sources the
    two accuracies come from their direct verdicts on the (1st, 2nd) and (1st, last) pairs
    (share won by the 1st, a tie half), counted in ``second_pairs`` / ``last_pairs``.
    """

    source: str
    ranking: str
    lists: int
    ndcg_2: float
    ndcg_3: float
    ndcg_5: float
    first_vs_second: float
    first_vs_last: float
    second_pairs: int
    last_pairs: int


def _row(source: str, ranking: str, rows: list[np.ndarray]) -> TableRow:
    result = listwise_scores(rows)
    return TableRow(
        source=source,
        ranking=ranking,
        lists=result.lists,
        ndcg_2=result.ndcg[2],
        ndcg_3=result.ndcg[3],
        ndcg_5=result.ndcg[5],
        first_vs_second=result.first_vs_second,
        first_vs_last=result.first_vs_last,
        second_pairs=result.lists,
        last_pairs=result.lists,
    )


def _first_share(verdicts: Sequence[tuple[int, int, float]], first: int, other: int) -> list[float]:
    out = []
    for a, b, p_b in verdicts:
        if (a, b) == (first, other):
            out.append(1.0 - p_b)
        elif (a, b) == (other, first):
            out.append(p_b)
    return out


def advisorqa_table(
    lists: Sequence[Sequence[int]],
    *,
    scores: Mapping[str, Mapping[int, float]],
    verdicts: Mapping[str, Sequence[tuple[int, int, float]]],
    lengths: Mapping[int, float],
    seed: int,
) -> list[TableRow]:
    """AdvisorQA's Table 3 (Kim et al. 2024) over gold lists of answer ids (best first).

    Rows: the random ranker (seeded), the longer-answer ranker, each scorer in ``scores``
    (answer id -> score; a list counts when every answer has a score), each pairwise source in
    ``verdicts`` ((answer_a, answer_b, share won by b) per verdict; a list counts when the
    source judged any pair within it). Measures as in :func:`listwise_scores`.
    """
    gold = [list(ids) for ids in lists if len(ids) >= 2]
    table = [
        _row("random ranker", "random", random_scores([len(ids) for ids in gold], seed=seed)),
        _row(
            "longer answer",
            "length",
            [np.array([lengths[a] for a in ids]) for ids in gold if all(a in lengths for a in ids)],
        ),
    ]
    for name, mapping in scores.items():
        rows = [
            np.array([mapping[a] for a in ids]) for ids in gold if all(a in mapping for a in ids)
        ]
        table.append(_row(name, "scores", rows))
    for name, given in verdicts.items():
        by_answer: dict[int, list[tuple[int, int, float]]] = {}
        for verdict in given:
            by_answer.setdefault(verdict[0], []).append(verdict)
        rows, second, last = [], [], []
        for ids in gold:
            position = {a: i for i, a in enumerate(ids)}
            mine = [(a, b, p) for x in ids for a, b, p in by_answer.get(x, []) if b in position]
            if not mine:
                continue
            rows.append(wins_scores(len(ids), [(position[a], position[b], p) for a, b, p in mine]))
            second += _first_share(mine, ids[0], ids[1])
            last += _first_share(mine, ids[0], ids[-1])
        row = _row(name, "wins", rows)
        table.append(
            dataclasses.replace(
                row,
                first_vs_second=float(np.mean(second)) if second else math.nan,
                first_vs_last=float(np.mean(last)) if last else math.nan,
                second_pairs=len(second),
                last_pairs=len(last),
            )
        )
    return table
