"""Reward consistency: Contrast Instructions, RewardFusion, swap invariance and transitivity.

Contrast Instructions and RewardFusion follow L. Shen, S. Chen, L. Song, L. Jin, B. Peng, H. Mi,
D. Khashabi and D. Yu (2023), "The Trickle-down Impact of Reward (In-)consistency on RLHF",
arXiv:2309.16155. A contrast pair is two lexically similar instructions
(I_A, I_B) with their own best answers (r_A, r_B); a consistent judge prefers the answer that
belongs to the instruction. Swap invariance and transitivity are the two order checks of an
LLM-as-a-judge (L. Zheng et al. 2023, "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena",
section 3.3, position bias; and the classic circular-triad count of M. G. Kendall and B. Babington
Smith 1940, "On the method of paired comparisons", Biometrika 31:324-345).

Everything here is pure: arrays and DataFrames in, frozen dataclasses out.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from core.errors import ApplicationError
from leaderboard.stats.bootstrap import (
    ClusterProportion,
    cluster_proportion,
    cluster_share,
    independent_proportion,
)
from leaderboard.stats.likert import collapse
from leaderboard.stats.majority import LABELS

if TYPE_CHECKING:
    import pandas as pd

RANDOM_CONTRAST_RATE = 0.5
"""A judge that picks at random between the two answers (or the two instructions) is right half
of the time: the random baseline of C_res and C_ins."""

RANDOM_INTRANSITIVE_RATE = 0.25
"""Share of cyclic triples in a random tournament on three items: each of the 3 comparisons is
won by either side with probability 1/2, so 8 equally likely outcomes, of which 2 are cycles
(A>B>C>A and A>C>B>A)."""

DEFAULT_WINDOW = (0.75, 0.9)
DEFAULT_FUSION_DELTA = 0.95


def unit_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return the rows of a [n, d] matrix scaled to unit length (a zero row is an error)."""
    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"embeddings must be a [n, d] matrix, not of shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise ValueError(f"embedding rows {zero.tolist()} are zero vectors (no direction)")
    unit: npt.NDArray[np.float64] = arr / norms[:, None]
    return unit


# --- Contrast pairs -------------------------------------------------------------------------


@dataclass(frozen=True)
class ContrastSelection:
    """The contrast pairs chosen from n items, and why others were not.

    pairs: (i, j) item indices with i < j, each item in at most one pair; similarities: the
    cosine of each pair, in the same order; candidates: item pairs whose cosine lies in the
    window (the pairs are drawn from these);
    above / below: item pairs more similar than the window's top (near duplicates) or less
    similar than its bottom; max_similarity: the largest cosine between two different items
    (None for fewer than two items).
    """

    pairs: tuple[tuple[int, int], ...]
    similarities: tuple[float, ...]
    n_items: int
    low: float
    high: float
    seed: int
    candidates: int
    above: int
    below: int
    max_similarity: float | None

    def explain(self) -> str:
        """Say in words how many pairs were found and, when none, why none qualify."""
        total = self.n_items * (self.n_items - 1) // 2
        window = f"[{self.low:g}, {self.high:g}]"
        if self.n_items < 2:
            return (
                f"Found 0 contrast pairs: {self.n_items} prompt(s) with a usable answer, "
                "and a contrast pair needs two."
            )
        head = f"Found {len(self.pairs)} contrast pair(s) among {self.n_items} prompts"
        if self.pairs:
            return f"{head} (cosine of the questions in {window})."
        assert self.max_similarity is not None
        return (
            f"{head}: of {total} prompt pairs, none has a question cosine in {window}; "
            f"{self.above} are above {self.high:g} (near duplicates) and {self.below} below "
            f"{self.low:g} (unrelated); the most similar two have cosine "
            f"{self.max_similarity:.3f}."
        )


def contrast_pairs_select(
    embeddings: npt.ArrayLike,
    *,
    low: float = DEFAULT_WINDOW[0],
    high: float = DEFAULT_WINDOW[1],
    seed: int = 0,
) -> ContrastSelection:
    """Pair items whose embeddings have cosine similarity in [low, high], each item at most once.

    Formula: cos(i, j) = e_i · e_j / (|e_i| |e_j|). Candidates are the pairs with
    low <= cos(i, j) <= high (both ends included): lexically close, yet not the same question.
    Matching: the items are visited in the order of ``numpy.random.default_rng(seed)
    .permutation(n)``; an item not yet paired takes, among the items not yet paired, its candidate
    of highest cosine (the smaller index on a tie). So each item is in at most one pair per seed,
    and a different seed can give a different matching of the same candidates.
    Source: Shen et al. (2023), Contrast Instructions, which pair the instructions of one benchmark
    by the cosine of their sentence embeddings in such a window ([0.75, 0.9] and [0.8, 0.9]).
    """
    if not -1.0 <= low <= high <= 1.0:
        raise ValueError(f"the window needs -1 <= low <= high <= 1, not [{low}, {high}]")
    unit = unit_rows(embeddings)
    n = unit.shape[0]
    if n < 2:
        return ContrastSelection((), (), n, low, high, seed, 0, 0, 0, None)
    cos = np.clip(unit @ unit.T, -1.0, 1.0)
    upper = np.triu_indices(n, k=1)
    values = cos[upper]
    in_window = (cos >= low) & (cos <= high)
    np.fill_diagonal(in_window, False)

    paired = np.zeros(n, dtype=bool)
    pairs: list[tuple[int, int]] = []
    for i in np.random.default_rng(seed).permutation(n).tolist():
        if paired[i]:
            continue
        options = np.flatnonzero(in_window[i] & ~paired)
        if options.size == 0:
            continue
        # argmax takes the first of equal maxima, and options are in index order.
        j = int(options[np.argmax(cos[i, options])])
        paired[i] = paired[j] = True
        pairs.append((min(i, j), max(i, j)))
    pairs.sort()
    return ContrastSelection(
        pairs=tuple(pairs),
        similarities=tuple(float(cos[i, j]) for i, j in pairs),
        n_items=n,
        low=low,
        high=high,
        seed=seed,
        candidates=int(((values >= low) & (values <= high)).sum()),
        above=int((values > high).sum()),
        below=int((values < low).sum()),
        max_similarity=float(values.max()),
    )


# --- C_res and C_ins for score judges ---------------------------------------------------------


@dataclass(frozen=True)
class ConsistencyRate:
    """A consistency share with its interval (``proportion.method`` says which: Wilson over
    independent units, or a bootstrap over their clusters; ``proportion.unit`` what was
    counted); ``ties`` are comparisons with equal scores (or a tie verdict), counted as not
    consistent; ``baseline`` is a random judge's share."""

    proportion: ClusterProportion
    ties: int
    baseline: float


@dataclass(frozen=True)
class ScoreConsistency:
    """C_res and C_ins of a score judge over ``pairs`` contrast pairs, one comparison each (the
    paper's Eq. 2 and 3), and the same counted in both directions of each pair (2 comparisons a
    pair, a named extra: ``c_res_both_directions``, ``c_ins_both_directions``)."""

    pairs: int
    c_res: ConsistencyRate
    c_ins: ConsistencyRate
    c_res_both_directions: ConsistencyRate | None = None
    c_ins_both_directions: ConsistencyRate | None = None


def score_consistency(
    scores: npt.ArrayLike, *, confidence: float = 0.95, rounds: int = 1000, seed: int = 0
) -> ScoreConsistency:
    """Return C_res and C_ins from the scores a judge gives to the four combinations of each pair.

    ``scores[k, i, j]`` is h(I_i, r_j) for contrast pair k, with index 0 for A and 1 for B, so
    ``scores[k]`` is [[h(I_A, r_A), h(I_A, r_B)], [h(I_B, r_A), h(I_B, r_B)]].
    Formulas, one comparison per contrast instance (n comparisons for n pairs), as the paper's
    Eq. 2 and 3: C_res = (1/n) sum_k 1[h(I_A, r_A) > h(I_A, r_B)] (given I_A, its own answer
    scores higher than the distractor r_B), C_ins = (1/n) sum_k 1[h(I_A, r_A) > h(I_B, r_A)]
    (given r_A, it scores higher under its own instruction). Each contrast pair uses its
    prompts once, so the n comparisons are independent and the interval is Wilson's.
    Named extra, both directions of each pair (2n comparisons): C_res both = (#[h(I_A, r_A) >
    h(I_A, r_B)] + #[h(I_B, r_B) > h(I_B, r_A)]) / 2n and C_ins both = (#[h(I_A, r_A) >
    h(I_B, r_A)] + #[h(I_B, r_B) > h(I_A, r_B)]) / 2n, whose two comparisons of a pair share
    its four scores, so their interval is a bootstrap over contrast pairs
    (:func:`leaderboard.stats.bootstrap.cluster_share`, ``rounds``, ``seed``).
    The inequality is strict: equal scores count as not consistent and are reported as ties.
    A random judge scores 50%.
    Source: Shen et al. (2023), Eq. 2 (response consistency) and Eq. 3 (instruction
    consistency) on Contrast Instructions.
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1:] != (2, 2):
        raise ValueError(f"scores must have shape [n, 2, 2], not {arr.shape}")
    if not np.isfinite(arr).all():
        bad = sorted({int(k) for k in np.argwhere(~np.isfinite(arr))[:, 0]})
        raise ValueError(f"scores of contrast pairs {bad} are not finite numbers")
    n = int(arr.shape[0])
    aa, ab, ba, bb = arr[:, 0, 0], arr[:, 0, 1], arr[:, 1, 0], arr[:, 1, 1]

    def once(own: npt.NDArray[np.float64], other: npt.NDArray[np.float64]) -> ConsistencyRate:
        share = independent_proportion(
            int((own > other).sum()), n, unit="contrast pair", confidence=confidence
        )
        return ConsistencyRate(share, int((own == other).sum()), RANDOM_CONTRAST_RATE)

    def both(own: npt.NDArray[np.float64], other: npt.NDArray[np.float64]) -> ConsistencyRate:
        share = cluster_proportion(
            own > other,
            np.r_[np.arange(n), np.arange(n)],
            unit="direction of a contrast pair",
            resampled="contrast pair",
            rounds=rounds,
            seed=seed,
            confidence=confidence,
        )
        return ConsistencyRate(share, int((own == other).sum()), RANDOM_CONTRAST_RATE)

    own_answer = np.concatenate([aa, bb])
    return ScoreConsistency(
        pairs=n,
        c_res=once(aa, ab),
        c_ins=once(aa, ba),
        c_res_both_directions=both(own_answer, np.concatenate([ab, ba])),
        c_ins_both_directions=both(own_answer, np.concatenate([ba, ab])),
    )


def choice_consistency(
    chosen: Sequence[str],
    expected: Sequence[str],
    clusters: Sequence[object] | npt.ArrayLike | None = None,
    *,
    unit: str = "verdict",
    resampled: str = "",
    rounds: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> ConsistencyRate:
    """Return the share of pairwise verdicts on contrast items that pick the answer that belongs.

    ``chosen`` holds canonical verdicts "A", "B" or "tie"; ``expected`` the side of r_A (the
    answer of the instruction shown) in the same item, "A" or "B"; ``clusters`` the contrast
    pair of each verdict. Formula: C_res = #[chosen = expected] / n over the verdicts given (the
    report gives one per item: the people's majority, a judge's orders combined; and, as named
    extras, every vote and every call); a tie counts as not consistent and is reported. The
    interval resamples the clusters (:func:`leaderboard.stats.bootstrap.cluster_proportion`):
    the two items of a contrast pair share their answers, and the votes on an item its text.
    Without clusters each verdict is its own cluster. A random chooser scores 50%.
    Source: Shen et al. (2023), whose human estimate (82.8% C_res) is the majority vote of three
    annotators choosing between r_A and r_B for I_A, on 100 items.
    """
    got = np.asarray(chosen, dtype=object)
    want = np.asarray(expected, dtype=object)
    if got.shape != want.shape or got.ndim != 1:
        raise ValueError("chosen and expected must be two lists of the same length")
    unknown = sorted({str(v) for v in got.tolist()} - set(LABELS))
    if unknown:
        raise ValueError(f"unknown verdict labels: {unknown}")
    if not set(want.tolist()) <= {"A", "B"}:
        raise ValueError("expected sides must be 'A' or 'B'")
    share = cluster_proportion(
        got == want,
        None if clusters is None else np.asarray(clusters, dtype=object),
        unit=unit,
        resampled=resampled or unit,
        rounds=rounds,
        seed=seed,
        confidence=confidence,
    )
    return ConsistencyRate(share, int((got == "tie").sum()), RANDOM_CONTRAST_RATE)


def score_agreement(
    answer_scores: Mapping[int, float],
    pairs: pd.DataFrame,
    votes: pd.DataFrame,
    *,
    confidence: float = 0.95,
    prompts: pd.Series | None = None,
    rounds: int = 1000,
    seed: int = 0,
    temperature: float = 1.0,
) -> ClusterProportion:
    """Return the share of people's votes that match a score judge's verdict on the same pair.

    ``answer_scores``: the judge's score h(r) of each answer, by answer id; ``pairs``: pair_id,
    answer_a, answer_b; ``votes``: pair_id, label (each person's canonical vote: A, B or tie).
    Pairs whose two answers are not both scored are left out, and so are the votes on them.
    The verdict on a pair is the PL judge's rule (`judges.reward.scoring`): P(B better) =
    sigmoid((h_B - h_A) / T), the Bradley-Terry probability at the model's fitted temperature
    ``temperature`` (T = 1 for an uncalibrated model; Guo et al. 2017's temperature scaling, as
    `judges.reward.calibration` fits it), binned as Likert = min(8, floor(8 P) + 1)
    and collapsed with ties (1-3 A, 4-5 tie, 6-8 B, DESIGN.md's conventions after the H4 study).
    Formula: #[vote = verdict] / #votes on the scored pairs, a tie a class of its own. Interval:
    with ``prompts`` (each pair's prompt, by pair id) a bootstrap over prompts (the votes on one
    pair share its verdict, and those on one prompt its difficulty; ``rounds``, ``seed``),
    without, Wilson's over the votes. Source: the with-ties agreement (S1) of Zheng et al.
    (2023), section 4.2, between each person's vote and the judge's one verdict per pair; used
    here to compare a score judge's agreement with people with and without RewardFusion (Shen
    et al. 2023).
    """
    import pandas as pd
    from scipy.special import expit

    scored = pd.Series(answer_scores, dtype=np.float64)
    frame = pairs[["pair_id", "answer_a", "answer_b"]].assign(
        h_a=lambda f: f["answer_a"].map(scored), h_b=lambda f: f["answer_b"].map(scored)
    )
    frame = frame.dropna(subset=["h_a", "h_b"])
    if not temperature > 0:
        raise ValueError(f"the temperature must be positive, not {temperature!r}")
    p = expit((frame["h_b"].to_numpy() - frame["h_a"].to_numpy()) / temperature)
    likert = np.minimum(8, np.floor(8 * p).astype(np.int64) + 1)
    verdict = pd.Series(collapse(likert, ties=True), index=frame["pair_id"].to_numpy())
    on_scored = votes[votes["pair_id"].isin(verdict.index)]
    agree = (
        on_scored["label"].astype(str).to_numpy() == verdict.loc[on_scored["pair_id"]].to_numpy()
    )
    if prompts is None:
        return independent_proportion(
            int(agree.sum()), len(on_scored), unit="vote", confidence=confidence
        )
    return cluster_proportion(
        agree,
        prompts.reindex(on_scored["pair_id"]).to_numpy(),
        unit="vote",
        resampled="prompt",
        rounds=rounds,
        seed=seed,
        confidence=confidence,
    )


# --- RewardFusion -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FusedScores:
    """Scores after RewardFusion, and what each query retrieved: ``neighbours`` (training
    examples fused, 0 = own score), ``nearest`` (the highest cosine among the examples it may
    retrieve, NaN when none), ``neighbour_cosine`` (the sum of the fused examples' cosines) and
    ``same_group_above`` (examples above δ left out because they share the query's group, such
    as other answers to the same prompt)."""

    scores: npt.NDArray[np.float64]
    neighbours: npt.NDArray[np.int64]
    delta: float
    nearest: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    neighbour_cosine: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    same_group_above: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.empty(0, dtype=np.int64)
    )


def reward_fusion(
    query_embeddings: npt.ArrayLike,
    query_scores: npt.ArrayLike,
    train_embeddings: npt.ArrayLike,
    train_scores: npt.ArrayLike,
    *,
    delta: float = DEFAULT_FUSION_DELTA,
    leave_out_same_index: bool = False,
    query_groups: npt.ArrayLike | None = None,
    train_groups: npt.ArrayLike | None = None,
) -> FusedScores:
    """Return each query's score fused with the scores of its near training examples (Eq. 4).

    Each row of the embeddings is the encoding of an (instruction ∘ answer) text. For a query x
    with its own score h(x), let N(x) = { training examples x_i with s_i = cos(x, x_i) > δ }.
    Formula: h̃(x) = ( h(x) + Σ_{i∈N(x)} s_i h(x_i) ) / ( 1 + Σ_{i∈N(x)} s_i ), a
    similarity-weighted average in which the query itself takes part with weight cos(x, x) = 1.
    With no neighbour, h̃(x) = h(x). The threshold is strict (a cosine equal to δ is left out).
    ``leave_out_same_index``: the queries are the training examples themselves (query i is
    example i), and each is left out of its own neighbours, so it counts once, as h(x).
    ``query_groups`` / ``train_groups``: an integer group per query and per example (for
    Concord, the prompt an answer belongs to); an example of the query's own group is never
    retrieved. Eq. 4 retrieves from the reward model's training corpus, other instructions'
    examples: other answers to the same prompt sit at cosines near 1 and would pull a pair's two
    scores towards a tie instead of towards what the model learnt of similar texts.
    Source: Shen et al. (2023), RewardFusion, Eq. 4 (δ = 0.95 by default here).
    """
    q_scores = np.asarray(query_scores, dtype=np.float64)
    t_scores = np.asarray(train_scores, dtype=np.float64)
    q = unit_rows(query_embeddings)
    if q.shape[0] != q_scores.shape[0] or q_scores.ndim != 1:
        raise ValueError("need one score per query embedding")
    t_raw = np.asarray(train_embeddings, dtype=np.float64)
    n = q.shape[0]
    if t_raw.size == 0:
        return FusedScores(
            q_scores.copy(),
            np.zeros(n, dtype=np.int64),
            delta,
            np.full(n, np.nan),
            np.zeros(n),
            np.zeros(n, dtype=np.int64),
        )
    t = unit_rows(t_raw)
    if t.shape[0] != t_scores.shape[0] or t_scores.ndim != 1:
        raise ValueError("need one score per training embedding")
    if t.shape[1] != q.shape[1]:
        raise ValueError(
            f"query and training embeddings differ in size ({q.shape[1]} vs {t.shape[1]})"
        )
    sims = q @ t.T
    if leave_out_same_index:
        if sims.shape[0] != sims.shape[1]:
            raise ValueError("leave_out_same_index needs as many queries as training examples")
        np.fill_diagonal(sims, -np.inf)
    same_group_above = np.zeros(n, dtype=np.int64)
    if (query_groups is None) != (train_groups is None):
        raise ValueError("give both query_groups and train_groups, or neither")
    if query_groups is not None and train_groups is not None:
        qg = np.asarray(query_groups, dtype=np.int64)
        tg = np.asarray(train_groups, dtype=np.int64)
        if qg.shape != (n,) or tg.shape != (t.shape[0],):
            raise ValueError("need one group per query and one per training example")
        same = qg[:, None] == tg[None, :]
        same_group_above = ((sims > delta) & same).sum(axis=1).astype(np.int64)
        sims = np.where(same, -np.inf, sims)
    retrieved = sims > delta
    weights = np.where(retrieved, sims, 0.0)
    fused = (q_scores + weights @ t_scores) / (1.0 + weights.sum(axis=1))
    nearest = sims.max(axis=1)
    return FusedScores(
        fused,
        retrieved.sum(axis=1).astype(np.int64),
        delta,
        np.where(np.isfinite(nearest), nearest, np.nan),
        weights.sum(axis=1),
        same_group_above,
    )


@dataclass(frozen=True)
class FusionRetrieval:
    """What RewardFusion retrieved for a set of queries: ``queries``, the ``pool`` of examples
    it could retrieve from, how many queries found a neighbour above δ, the neighbours in all,
    the mean and largest cosine of those neighbours (None without any), the median of each
    query's nearest allowed cosine, and the examples above δ left out for sharing the query's
    group (other answers to the same prompt)."""

    delta: float
    queries: int
    pool: int
    queries_with_neighbours: int
    neighbours: int
    neighbour_cosine_mean: float | None
    neighbour_cosine_max: float | None
    nearest_cosine_median: float | None
    same_prompt_left_out: int


def fusion_retrieval(fused: FusedScores, *, pool: int) -> FusionRetrieval:
    """Summarise a :func:`reward_fusion` result: counts and cosines of what it retrieved (the
    largest neighbour cosine is the largest ``nearest`` of a query that retrieved any)."""
    count = fused.neighbours
    total = int(count.sum())
    finite = fused.nearest[np.isfinite(fused.nearest)]
    with_any = count > 0
    top = float(fused.nearest[with_any].max()) if with_any.any() else None
    return FusionRetrieval(
        delta=fused.delta,
        queries=int(count.size),
        pool=pool,
        queries_with_neighbours=int(with_any.sum()),
        neighbours=total,
        neighbour_cosine_mean=float(fused.neighbour_cosine.sum() / total) if total else None,
        neighbour_cosine_max=top,
        nearest_cosine_median=float(np.median(finite)) if finite.size else None,
        same_prompt_left_out=int(fused.same_group_above.sum()),
    )


# --- Swap invariance --------------------------------------------------------------------------


@dataclass(frozen=True)
class SwapInvariance:
    """Share of pairs whose collapsed verdict is the same in both orders.

    ``order_invariant`` judges (a score model: each answer is scored alone) cannot change with
    the order, so they carry no share: ``proportion`` is None and the report says so.
    """

    order_invariant: bool
    proportion: ClusterProportion | None


def swap_invariance(
    forward: list[str] | pd.Categorical[Any],
    backward: list[str] | pd.Categorical[Any],
    clusters: npt.ArrayLike | None = None,
    *,
    order_invariant: bool = False,
    confidence: float = 0.95,
    rounds: int = 1000,
    seed: int = 0,
) -> SwapInvariance:
    """Return how often a judge's verdict on a pair survives swapping the two answers.

    ``forward[k]`` and ``backward[k]`` are the judge's collapsed verdicts on pair k called with A
    first and with B first, both already in canonical A/B terms ("A", "B", "tie"; a Categorical of
    them is read by its codes). Formula:
    #[forward = backward] / n; a tie in one order and a side in the other is a change. Interval:
    with ``clusters`` (each pair's prompt) a bootstrap over them
    (:func:`leaderboard.stats.bootstrap.cluster_proportion`, ``rounds``, ``seed``), since the
    pairs of one prompt are not independent; without, Wilson's over the pairs. Source: Zheng et
    al. (2023), section 3.3 on position bias (the "consistency" of a judge called in both
    orders).
    """
    import pandas as pd

    if order_invariant:
        return SwapInvariance(True, None)
    if np.ndim(forward) != 1 or np.ndim(backward) != 1 or len(forward) != len(backward):
        raise ValueError("forward and backward must be two lists of the same length")
    # Label codes (a Categorical on the labels already is read as it is, without hashing).
    codes = [pd.Categorical(side, categories=LABELS).codes for side in (forward, backward)]
    if any((c < 0).any() for c in codes):
        bad = [
            np.asarray(side, dtype=object)[c < 0]
            for side, c in zip((forward, backward), codes, strict=True)
        ]
        unknown = sorted({str(v) for b in bad for v in b if not pd.isna(v)})
        raise ValueError(f"unknown verdict labels: {unknown or ['None']}")
    same = codes[0] == codes[1]
    if clusters is None:
        share = independent_proportion(
            int(same.sum()), len(forward), unit="pair in both orders", confidence=confidence
        )
    else:
        share = cluster_proportion(
            same,
            clusters,
            unit="pair in both orders",
            resampled="prompt",
            rounds=rounds,
            seed=seed,
            confidence=confidence,
        )
    return SwapInvariance(False, share)


# --- Transitivity -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Intransitivity:
    """Cyclic triples among answers judged in all three pairs.

    triples: triples whose three pairs all have a decided (non-tie) verdict, the denominator;
    intransitive: those among them that form a cycle; tied_triples: triples judged in all three
    pairs where at least one verdict is a tie (left out of the rate, neither cyclic nor not);
    random_rate: a random judge's expected share, 1/4.
    """

    triples: int
    intransitive: int
    tied_triples: int
    proportion: ClusterProportion
    random_rate: float


class PairRepeated(ApplicationError, ValueError):
    """A group's triples cannot be counted: row ``row`` compares an item with itself
    (``kind`` "self") or repeats an earlier row's unordered pair (``kind`` "twice")."""

    def __init__(self, kind: str, row: int) -> None:
        super().__init__(kind, row)
        self.kind = kind
        self.row = row


def intransitive_triples(
    verdicts: pd.DataFrame,
    *,
    group: str = "group",
    first: str = "first",
    second: str = "second",
    label: str = "label",
    confidence: float = 0.95,
    rounds: int = 1000,
    seed: int = 0,
) -> Intransitivity:
    """Count the intransitive triples (A > B, B > C, C > A) among each group's items.

    One row per judged pair of items of a group (for Concord: a prompt and turn, items are its
    answers): ``label`` is "A" when ``first`` won, "B" when ``second`` won, "tie". Each unordered
    pair may appear once per group (collapse several votes to a majority first). For every three
    items of a group whose three pairs are all judged: with no tie, the triple is intransitive when
    each item beats exactly one other (a 3-cycle); with a tie it is counted apart as tied, not in
    the rate. Formula: rate = #cyclic / #decided triples, with its Wilson interval; a random judge
    gives 1/4. The interval resamples the groups (a group's triples share its pairs, so they
    are not independent): :func:`leaderboard.stats.bootstrap.cluster_share` over the groups'
    (cyclic, decided) counts. Source: Kendall and Babington Smith (1940), circular triads of
    paired comparisons.
    """
    import pandas as pd

    missing = {group, first, second, label} - set(verdicts.columns)
    if missing:
        raise ValueError(f"verdicts lack the columns {sorted(missing)}")
    n = len(verdicts)
    groups, _ = pd.factorize(verdicts[group].to_numpy(dtype=object))
    items, _ = pd.factorize(
        np.concatenate(
            [verdicts[first].to_numpy(dtype=object), verdicts[second].to_numpy(dtype=object)]
        )
    )
    try:
        return intransitive_triples_coded(
            groups,
            items[:n],
            items[n:],
            verdicts[label],
            confidence=confidence,
            rounds=rounds,
            seed=seed,
        )
    except PairRepeated as error:
        row = verdicts.iloc[error.row]
        if error.kind == "self":
            raise ValueError(
                f"group {row[group]!r}: item {row[first]!r} is compared with itself"
            ) from None
        raise ValueError(
            f"group {row[group]!r}: the pair ({row[first]!r}, {row[second]!r}) has more than one "
            "verdict; collapse votes to one verdict per pair first"
        ) from None


def intransitive_triples_coded(
    groups: npt.ArrayLike,
    first: npt.ArrayLike,
    second: npt.ArrayLike,
    labels: npt.NDArray[Any] | pd.Series | pd.Categorical[Any] | list[str],
    *,
    confidence: float = 0.95,
    clusters: npt.ArrayLike | None = None,
    resampled: str = "group",
    rounds: int = 1000,
    seed: int = 0,
) -> Intransitivity:
    """:func:`intransitive_triples` on integer codes: the group and the two items of each row
    as non-negative integers (any numbering: the counts do not depend on it), and its label
    (A, B or tie). ``clusters``: each row's cluster (for Concord its prompt, when a group is a
    prompt and turn), what the interval resamples (None: the groups); ``resampled`` names it.
    Raises :class:`PairRepeated` with the first offending row."""
    import pandas as pd

    codes = pd.Categorical(labels, categories=LABELS).codes.astype(np.int64)
    if (codes < 0).any():
        values = pd.Series(labels).to_numpy(dtype=object)[codes < 0]
        unknown = sorted({str(v) for v in pd.unique(values)})
        raise ValueError(f"unknown verdict labels: {unknown}")
    g = np.asarray(groups, dtype=np.int64)
    x = np.asarray(first, dtype=np.int64)
    y = np.asarray(second, dtype=np.int64)
    same = np.flatnonzero(x == y)
    if same.size:
        raise PairRepeated("self", int(same[0]))
    lo, hi = np.minimum(x, y), np.maximum(x, y)

    def rate(
        cyclic: npt.NDArray[np.int64], decided: npt.NDArray[np.int64], of: npt.ArrayLike | None
    ) -> ClusterProportion:
        return cluster_share(
            cyclic,
            decided,
            of,
            unit="triple",
            resampled=resampled,
            rounds=rounds,
            seed=seed,
            confidence=confidence,
        )

    if g.size == 0:
        none = np.zeros(0, dtype=np.int64)
        return Intransitivity(0, 0, 0, rate(none, none, None), RANDOM_INTRANSITIVE_RATE)
    if min(g.min(), lo.min()) < 0:
        raise ValueError("group and item codes must be non-negative integers")
    # A node is (group, item) as one int64 key; nodes numbered in key order.
    span = np.int64(hi.max()) + 1
    node_key, node_of = np.unique(
        np.concatenate([g, g]) * span + np.r_[lo, hi], return_inverse=True
    )
    lo_node, hi_node = node_of[: g.size], node_of[g.size :]
    # A repeated pair: the first row, in row order, whose pair of nodes an earlier row has.
    twice = pd.Series(lo_node * np.int64(node_key.size) + hi_node).duplicated().to_numpy()
    if twice.any():
        raise PairRepeated("twice", int(np.argmax(twice)))
    # Orient every edge from its smaller item code: +1 when that item won, -1 when it lost, 0 tie.
    tie, a_code = LABELS.index("tie"), LABELS.index("A")
    sign = np.where(codes == tie, 0, np.where((codes == a_code) == (x < y), 1, -1))
    # Each group's items numbered 0..k-1 in code order (the order does not change the counts).
    node_group = node_key // span
    starts = np.flatnonzero(np.r_[True, node_group[1:] != node_group[:-1]])
    sizes = np.diff(np.r_[starts, node_key.size])
    local = np.arange(node_key.size) - np.repeat(starts, sizes)
    a_local, b_local = local[lo_node], local[hi_node]
    # Each row's group, numbered by rank, and its size (items).
    group_rank = np.repeat(np.arange(starts.size), sizes)[lo_node]
    size = sizes[group_rank]
    decided = cyclic = tied = 0
    group_decided = np.zeros(starts.size, dtype=np.int64)
    group_cyclic = np.zeros(starts.size, dtype=np.int64)
    for k in sorted(int(v) for v in np.unique(sizes) if v >= 3):
        in_k = size == k
        group_ids, row_group = np.unique(group_rank[in_k], return_inverse=True)
        # state[g, i, j] for i < j: 0 not judged, 1 i won, 2 j won, 3 tie.
        state = np.zeros((group_ids.size, k, k), dtype=np.int8)
        edge_sign = sign[in_k]
        state[row_group, a_local[in_k], b_local[in_k]] = np.where(
            edge_sign == 1, 1, np.where(edge_sign == -1, 2, 3)
        )
        trios = np.array(list(itertools.combinations(range(k), 3)), dtype=np.int64)
        # In chunks of groups, so that groups x triples stays a few million cells.
        step = max(1, 4_000_000 // len(trios))
        for begin in range(0, group_ids.size, step):
            part = state[begin : begin + step]
            ab = part[:, trios[:, 0], trios[:, 1]]
            bc = part[:, trios[:, 1], trios[:, 2]]
            ac = part[:, trios[:, 0], trios[:, 2]]
            judged = (ab > 0) & (bc > 0) & (ac > 0)
            with_tie = judged & ((ab == 3) | (bc == 3) | (ac == 3))
            clean = judged & ~with_tie
            # a > b > c > a, or the reverse cycle.
            cycle = ((ab == 1) & (bc == 1) & (ac == 2)) | ((ab == 2) & (bc == 2) & (ac == 1))
            decided += int(clean.sum())
            tied += int(with_tie.sum())
            cyclic += int((clean & cycle).sum())
            ranks = group_ids[begin : begin + step]
            group_decided[ranks] = clean.sum(axis=1)
            group_cyclic[ranks] = (clean & cycle).sum(axis=1)
    # Each group's cluster: that of its first row (the caller keeps a group in one cluster).
    of_group: npt.ArrayLike | None = None
    if clusters is not None:
        row_cluster = np.asarray(clusters, dtype=object)
        if row_cluster.shape != g.shape:
            raise ValueError("need one cluster per row")
        _, first_row = np.unique(group_rank, return_index=True)
        of_group = row_cluster[first_row]
    return Intransitivity(
        triples=decided,
        intransitive=cyclic,
        tied_triples=tied,
        proportion=rate(group_cyclic, group_decided, of_group),
        random_rate=RANDOM_INTRANSITIVE_RATE,
    )
