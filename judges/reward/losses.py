"""Training objectives of the Plackett-Luce model, and AdvisorQA's pairwise decomposition.

Plackett-Luce (R. L. Plackett 1975, "The analysis of permutations", Applied Statistics 24:193;
R. D. Luce 1959, "Individual choice behavior"): the probability of an observed ranking
``1 > 2 > ... > K`` of K answers with scores ``h_1..h_K`` is

    P = prod_{k=1..K} exp(h_k) / sum_{i=k..K} exp(h_i),

so the loss of one list is ``-log P = sum_k (logsumexp(h_k..h_K) - h_k)``. The suffix
log-sum-exps are one reverse cumulative pass, so a list costs O(K). For K = 2 it is the
Bradley-Terry loss ``-log sigmoid(h_1 - h_2)`` of ordinary reward models.

AdvisorQA (Kim et al. 2024, "AdvisorQA: Towards helpful and harmless advice-seeking question
answering with collective intelligence") trains its PL(K) models with pairwise Bradley-Terry
terms decomposed from each question's ranked answers; :func:`advisorqa_pairs` reproduces it.
"""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

LISTWISE = "listwise"
PAIRWISE = "pairwise"
RECIPES = (LISTWISE, PAIRWISE)
K_CHOICES = ("2", "3", "4", "5", "all")


def parse_k(value: str | int | None) -> int | None:
    """K as an int, or None for "all"; raise ValueError naming the value otherwise."""
    if value is None or str(value) == "all":
        return None
    k = int(value)
    if k < 2:
        raise ValueError(f"K must be 2 or more, or 'all'; got {value!r}")
    return k


def recipe_name(recipe: str, k: str | int | None) -> str:
    """The name of a PL model's training recipe and K, the same wherever a model is named.

    "PL(4)" means two different things: the listwise recipe's PL(4) is the PL likelihood of
    each list's top 4 answers, AdvisorQA's pairwise PL(4) is the Bradley-Terry pairs of the top
    3 and the last (:func:`advisorqa_pairs`). So the name says which answers count:
    ``"PL listwise, top 4"``, ``"PL listwise, all answers"``, ``"PL pairwise, top 3 + last"``
    (K >= 4), ``"PL pairwise, top 3"`` (K = 2 or 3: top K), ``"PL pairwise, every pair"``.
    """
    size = parse_k(None if k is None or str(k) in ("", "None") else k)
    if recipe == LISTWISE:
        return "PL listwise, all answers" if size is None else f"PL listwise, top {size}"
    if recipe == PAIRWISE:
        if size is None:
            return "PL pairwise, every pair"
        if size >= 4:
            return f"PL pairwise, top {size - 1} + last"
        return f"PL pairwise, top {size}"
    return f"PL {recipe}, K={k}"


def advisorqa_pairs(n: int, k: int | None, *, rng: random.Random) -> list[tuple[int, int]]:
    """The (better, worse) positions AdvisorQA's script takes from a list ranked best first.

    For a list of ``n`` answers (positions 0 = best .. n-1 = last):
    PL(2) is 1st vs 2nd (1 pair); PL(3) all pairs of the top 3 (3 pairs); PL(4) all pairs of the
    top 3 and the last (6 pairs); PL(5) all pairs of the top 4 and the last (10 pairs). In
    general PL(K) for K >= 4 takes the top K-1 and the last answer. ``k=None`` ("all", our
    extension) takes every pair of the list. The pairs come shuffled by ``rng``. A list needs at
    least K answers; raise ValueError otherwise.
    """
    size = n if k is None else k
    if n < size or size < 2:
        raise ValueError(f"a list of {n} answers cannot give PL({size}) pairs")
    top_and_last = k is not None and k >= 4
    positions = [*range(k - 1), n - 1] if top_and_last and k else list(range(size))
    pairs = list(itertools.combinations(positions, 2))
    rng.shuffle(pairs)
    return pairs


def pl_list_loss(scores: torch.Tensor) -> torch.Tensor:
    """The PL negative log-likelihood of one list of scores given best first (1-D tensor)."""
    import torch

    suffix = torch.logcumsumexp(scores.flip(0), dim=0).flip(0)
    return (suffix - scores).sum()


def pl_batch_loss(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean PL negative log-likelihood over a batch of padded lists, O(K) per list.

    ``scores`` is [B, L] with each row best first; ``mask`` [B, L] is True for real answers
    (a row's real answers come first, padding after). Padding gets -inf, so it adds nothing to
    any suffix sum, and its terms are masked out.
    """
    import torch

    masked = scores.masked_fill(~mask, float("-inf"))
    suffix = torch.logcumsumexp(masked.flip(1), dim=1).flip(1)
    terms = torch.where(mask, suffix - scores, torch.zeros_like(scores))
    return terms.sum(dim=1).mean()


def bt_pair_loss(
    better: torch.Tensor, worse: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Weighted mean Bradley-Terry loss ``-log sigmoid(h_better - h_worse)`` over pairs."""
    import torch

    terms = torch.nn.functional.softplus(worse - better)
    if weights is None:
        return terms.mean()
    return (terms * weights).sum() / weights.sum().clamp_min(1e-12)
