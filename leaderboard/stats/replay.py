"""Replaying a finished study's human labels in another order, to see what active selection buys.

A pool of labels already collected (MT-Bench's expert votes, say) is revealed one label at a
time, either in a uniformly random order or in the order :mod:`leaderboard.stats.active` would
have asked for them: each draw takes an open label with probability
``q = e / k + (1 - e) priority / sum(priority)`` (:func:`~leaderboard.stats.active.
selection_probabilities`), the priorities recomputed from the labels revealed so far every
``refresh`` labels, as the analysis worker recomputes a live study's priorities between claims.
After n labels the curve records

- the judge's agreement with people, ``sum v a / n`` with the LURE weights ``v`` of the draws
  (:func:`~leaderboard.stats.active.lure_weights`; all 1 for the random order), and the width of
  its percentile interval over prompts (:func:`~leaderboard.stats.active.weighted_agreement`);
- Kendall's tau-b between the people's Bradley-Terry leaderboard on those n labels and the one on
  the whole pool (:func:`leaderboard.stats.bradley_terry.bradley_terry`, ties as half a win).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.stats.active import (
    DEFAULT_RANDOM_SHARE,
    PriorityWeights,
    agreement_strata,
    category_under_coverage,
    disagreement_share,
    interval_overlap,
    lure_weights,
    neyman_priority,
    pair_priority,
    poststratified_agreement,
    selection_probabilities,
    weighted_agreement,
)
from leaderboard.stats.bradley_terry import bradley_terry
from leaderboard.stats.ranking import rank_correlation

Policy = Literal["random", "active", "neyman", "live"]
Estimator = Literal["weighted", "poststratified"]
# The labels' codes: the first system better, a tie, the second system better.
LABELS = ("A", "tie", "B")
_WINNER = {"A": "model_a", "tie": "tie", "B": "model_b"}


@dataclass(frozen=True)
class ReplayPool:
    """The labels to replay, one row each: ``unit`` (the agreement unit: prompt, pair of systems,
    turn), ``prompt`` (the bootstrap's cluster), ``category``, ``system_a`` and ``system_b``,
    ``label`` (the person's, in A / tie / B), ``judge_label`` (the judge's verdict on the unit)
    and ``judge_disagreement`` (in [0, 1]: how much the automatic judges disagree on the unit)."""

    frame: pd.DataFrame

    COLUMNS = (
        "unit",
        "prompt",
        "category",
        "system_a",
        "system_b",
        "label",
        "judge_label",
        "judge_disagreement",
    )

    def __post_init__(self) -> None:
        missing = set(self.COLUMNS) - set(self.frame.columns)
        if missing:
            raise ValueError(f"the replay pool lacks the columns {sorted(missing)}")
        bad = set(self.frame["label"]) - set(LABELS)
        if bad:
            raise ValueError(f"labels must be A, tie or B; found {sorted(map(str, bad))}")
        share = self.frame["judge_disagreement"].to_numpy(dtype=np.float64)
        if ((share < 0) | (share > 1) | np.isnan(share)).any():
            raise ValueError("judge_disagreement must lie in [0, 1]")

    def __len__(self) -> int:
        return len(self.frame)


@dataclass(frozen=True)
class ReplayPoint:
    """The state of a replay after ``labels`` labels."""

    labels: int
    agreement: float
    lower: float
    upper: float
    kendall_tau: float

    @property
    def width(self) -> float:
        return self.upper - self.lower


@dataclass(frozen=True)
class ReplayCurve:
    policy: Policy
    seed: int
    points: tuple[ReplayPoint, ...]


@dataclass(frozen=True)
class _Coded:
    unit: npt.NDArray[np.intp]
    n_units: int
    unit_category: npt.NDArray[np.intp]
    unit_a: npt.NDArray[np.intp]
    unit_b: npt.NDArray[np.intp]
    systems: list[str]
    label: npt.NDArray[np.intp]
    agree: npt.NDArray[np.float64]
    judge_disagreement: npt.NDArray[np.float64]
    prompt: npt.NDArray[np.intp]
    stratum: npt.NDArray[np.intp]


def _code(pool: ReplayPool) -> _Coded:
    f = pool.frame
    unit, units = pd.factorize(f["unit"])
    first = pd.Series(np.arange(len(f))).groupby(unit).first().to_numpy()
    systems = sorted(set(f["system_a"]) | set(f["system_b"]))
    position = {s: i for i, s in enumerate(systems)}
    category, _ = pd.factorize(f["category"])
    label = np.asarray(f["label"].map({v: i for i, v in enumerate(LABELS)}), dtype=np.intp)
    return _Coded(
        unit=unit.astype(np.intp),
        n_units=len(units),
        unit_category=category[first].astype(np.intp),
        unit_a=f["system_a"].map(position).to_numpy(dtype=np.intp)[first],
        unit_b=f["system_b"].map(position).to_numpy(dtype=np.intp)[first],
        systems=systems,
        label=label,
        agree=(f["label"].to_numpy() == f["judge_label"].to_numpy()).astype(np.float64),
        judge_disagreement=f["judge_disagreement"].to_numpy(dtype=np.float64),
        prompt=pd.factorize(f["prompt"])[0].astype(np.intp),
        stratum=agreement_strata(
            f["judge_label"].to_numpy() == "tie", f["judge_disagreement"].to_numpy()
        ),
    )


def _battles(pool: ReplayPool, rows: npt.NDArray[np.intp]) -> pd.DataFrame:
    f = pool.frame.iloc[rows]
    return pd.DataFrame(
        {
            "model_a": f["system_a"].to_numpy(),
            "model_b": f["system_b"].to_numpy(),
            "winner": f["label"].map(_WINNER).to_numpy(),
        }
    )


def _priority(
    pool: ReplayPool,
    coded: _Coded,
    revealed: npt.NDArray[np.intp],
    weights: PriorityWeights,
    seed: int,
    overlap_rounds: int,
) -> npt.NDArray[np.float64]:
    """Each label's priority (that of its unit) from the labels revealed so far."""
    counts = np.zeros((coded.n_units, len(LABELS)))
    np.add.at(counts, (coded.unit[revealed], coded.label[revealed]), 1.0)
    per_unit = counts.sum(axis=1)
    m = len(coded.systems)
    lower = np.full(m, np.nan)
    upper = np.full(m, np.nan)
    if revealed.size >= 2 * m:
        board = bradley_terry(_battles(pool, revealed), rounds=overlap_rounds, seed=seed).set_index(
            "model"
        )
        for i, system in enumerate(coded.systems):
            if system in board.index:
                lower[i], upper[i] = board.at[system, "lower"], board.at[system, "upper"]
    unit_terms = {
        "judge_disagreement": np.zeros(coded.n_units),
        "interval_overlap": interval_overlap(
            lower[coded.unit_a], upper[coded.unit_a], lower[coded.unit_b], upper[coded.unit_b]
        ),
        "human_disagreement": disagreement_share(counts),
        "under_coverage": category_under_coverage(per_unit, coded.unit_category),
    }
    np.maximum.at(unit_terms["judge_disagreement"], coded.unit, coded.judge_disagreement)
    return pair_priority(unit_terms, weights)[coded.unit]


def _neyman_priority(coded: _Coded, revealed: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    """Each label's Neyman priority: the standard deviation ``sqrt(p_h (1 - p_h))`` of the
    agreement in its stratum (:func:`~leaderboard.stats.active.agreement_strata`), with ``p_h =
    (agreeing + 1) / (revealed + 2)`` over the stratum's labels revealed so far (1/2 before any).

    Drawing in proportion to it is Neyman's allocation (J. Neyman (1934), "On the two different
    aspects of the representative method", JRSS 97:558-625; Cochran (1977), "Sampling
    Techniques", section 5.5): labels per stratum in proportion to its size times its standard
    deviation, which minimises the variance of the (post-)stratified mean for a given number of
    labels."""
    strata = int(coded.stratum.max()) + 1
    seen = coded.stratum[revealed]
    agreeing = np.bincount(seen, weights=coded.agree[revealed], minlength=strata)
    p = (agreeing + 1.0) / (np.bincount(seen, minlength=strata) + 2.0)
    return np.sqrt(p * (1.0 - p))[coded.stratum]


def replay_order(
    pool: ReplayPool,
    *,
    policy: Policy,
    seed: int,
    random_share: float = DEFAULT_RANDOM_SHARE,
    weights: PriorityWeights | None = None,
    refresh: int = 100,
    overlap_rounds: int = 50,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Return the order in which the pool's labels are revealed and each draw's propensity.

    ``random``: a uniformly random permutation (propensity ``1 / (N - m + 1)`` at draw m).
    ``active``: draws from :func:`selection_probabilities` of the priorities, recomputed every
    ``refresh`` labels (the four-term priority); ``neyman``: the same draw with
    :func:`_neyman_priority` in place of the priority; ``live``: the same draw with the priority
    the analysis worker stores today, :func:`~leaderboard.stats.active.neyman_priority` (Neyman's
    allocation with its floor) over the labels revealed so far; within a batch each draw is
    made among the labels still open with the batch's priorities; the systems' intervals
    behind the overlap term are Bradley-Terry bootstrap percentiles of ``overlap_rounds``
    rounds over the labels revealed so far.
    ``rng = numpy.random.default_rng(seed)`` makes every choice.
    """
    if refresh < 1:
        raise ValueError("refresh must be at least 1")
    n = len(pool)
    rng = np.random.default_rng(seed)
    if policy == "random":
        return rng.permutation(n).astype(np.intp), 1.0 / (n - np.arange(n, dtype=np.float64))
    if policy not in ("active", "neyman", "live"):
        raise ValueError("policy must be 'random', 'active', 'neyman' or 'live'")
    coded = _code(pool)
    chosen = weights or PriorityWeights()
    open_ = np.ones(n, dtype=bool)
    order = np.empty(n, dtype=np.intp)
    propensity = np.empty(n)
    priority = np.zeros(n)
    for m in range(n):
        if m % refresh == 0 and policy == "active":
            priority = _priority(pool, coded, order[:m], chosen, seed + m, overlap_rounds)
        elif m % refresh == 0 and policy == "neyman":
            priority = _neyman_priority(coded, order[:m])
        elif m % refresh == 0:
            seen = order[:m]
            priority = neyman_priority(coded.stratum, coded.stratum[seen], coded.agree[seen])
        candidates = np.flatnonzero(open_)
        q = selection_probabilities(priority[candidates], random_share=random_share)
        j = int(rng.choice(candidates.size, p=q))
        order[m] = candidates[j]
        propensity[m] = min(float(q[j]), 1.0)  # the last open label: 1 up to rounding
        open_[candidates[j]] = False
    return order, propensity


def replay_curve(
    pool: ReplayPool,
    order: npt.NDArray[np.intp],
    propensity: npt.NDArray[np.float64],
    *,
    policy: Policy,
    seed: int,
    sizes: Sequence[int],
    rounds: int = 1000,
    confidence: float = 0.95,
    estimator: Estimator = "weighted",
) -> ReplayCurve:
    """Return the agreement, its interval over prompts and the leaderboard's Kendall tau against
    the whole pool's after each number of labels in ``sizes`` (see the module docstring).

    ``estimator``: ``weighted``, the LURE mean (:func:`~leaderboard.stats.active.
    weighted_agreement`); ``poststratified``, the LURE-weighted post-stratified mean over the
    judges' agreement strata of the whole pool (:func:`~leaderboard.stats.active.
    poststratified_agreement`); for the random order the weights are 1 either way."""
    coded = _code(pool)
    n = len(pool)
    full = bradley_terry(_battles(pool, np.arange(n))).set_index("model")["rating"]
    points = []
    for size in sizes:
        if not 1 <= size <= n:
            raise ValueError(f"a replay size must lie in 1..{n}, not {size}")
        rows = order[:size]
        weights = lure_weights(propensity[:size], n)
        if estimator == "poststratified":
            interval = poststratified_agreement(
                coded.agree[rows],
                weights,
                coded.prompt[rows],
                coded.stratum[rows],
                pool_clusters=coded.prompt,
                pool_strata=coded.stratum,
                rounds=rounds,
                confidence=confidence,
                seed=seed,
            )
        else:
            interval = weighted_agreement(
                coded.agree[rows],
                weights,
                coded.prompt[rows],
                rounds=rounds,
                confidence=confidence,
                seed=seed,
            )
        board = bradley_terry(_battles(pool, rows)).set_index("model")["rating"]
        tau = rank_correlation(full, board).kendall.estimate
        points.append(
            ReplayPoint(size, interval.estimate, interval.lower, interval.upper, float(tau))
        )
    return ReplayCurve(policy, seed, tuple(points))


def labels_to_reach(curve: ReplayCurve, width: float) -> int | None:
    """The fewest labels from which on the curve's interval stays at most ``width`` wide (None
    if its last point is wider): a single narrow point among wider ones does not count."""
    reached = None
    for point in curve.points:
        if not math.isnan(point.width) and point.width <= width:
            reached = point.labels if reached is None else reached
        else:
            reached = None
    return reached
