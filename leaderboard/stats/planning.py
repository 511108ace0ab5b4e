"""The label budget planner: how the agreement interval and the leaderboard's stability would
change with more human labels, and how many more labels (and how much pay) a target needs.

The agreement of a judge with people is a mean of per-label agreements ``a`` (1 or 0) grouped in
prompts. Its variance with ``n`` labels spread over ``C`` prompts is, by the one-way random
effects model of a clustered mean (W. G. Cochran (1977), "Sampling Techniques", 3rd ed., section
9.4; the components estimated by the analysis of variance, S. R. Searle, G. Casella & C. E.
McCulloch (1992), "Variance Components", section 3.6, with ``n0`` for unequal prompt sizes):

    Var = s_b^2 / C + s_w^2 / n

where ``s_w^2`` is the pooled variance of labels within a prompt and ``s_b^2`` the variance of
the prompts' true agreement rates. More labels on the same prompts shrink only the second term:
``s_b^2 / C`` is a floor that only more prompts lower. The planner projects the interval's half
width ``z sqrt(Var)`` to larger n (and, for a pilot, to the study's full prompt count), solves
for the labels a target half width needs, and prices them at the study's pay per judgment.

The leaderboard's stability is projected by resampling: for each size n, ``rounds`` leaderboards
are fitted on n labels drawn with replacement from the current ones (Bradley-Terry, ties as
half a win), and their mean Kendall tau-b against the current leaderboard is the expected rank
agreement of a leaderboard of n labels with the one the current labels point to (a model
missing from a round's draw keeps the ridge's prior strength there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from leaderboard.stats.battles import SCORE_A
from leaderboard.stats.bradley_terry import win_matrix_strengths
from leaderboard.stats.correlation import correlation

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class VarianceComponents:
    """The agreement's variance components: between prompts, within a prompt, and the counts."""

    mean: float
    between: float
    within: float
    labels: int
    prompts: int


@dataclass(frozen=True)
class PlanPoint:
    """The projection at ``labels`` labels: the half width of the agreement interval and the
    expected Kendall tau of the leaderboard (NaN where it was not projected)."""

    labels: int
    half_width: float
    kendall_tau: float


@dataclass(frozen=True)
class LabelPlan:
    """What more labels would buy, and what a target half width costs.

    ``labels_needed`` is the total labels the target needs (None: unreachable on ``prompts``
    prompts, since ``floor_half_width`` exceeds it), ``additional`` those beyond the current
    ones, ``cost_cents`` their pay at ``cents_per_judgment``."""

    components: VarianceComponents
    prompts: int
    confidence: float
    current_half_width: float
    floor_half_width: float
    target_half_width: float | None
    labels_needed: int | None
    additional: int | None
    cost_cents: int | None
    points: tuple[PlanPoint, ...]


def variance_components(agree: npt.ArrayLike, clusters: npt.ArrayLike) -> VarianceComponents:
    """Return the ANOVA estimates of the between- and within-prompt variance of agreement, from
    one 0/1 (or any numeric) value per label and its prompt; see
    :func:`variance_components_from_sums` for the formulas."""
    import pandas as pd

    a = np.asarray(agree, dtype=np.float64)
    codes = pd.factorize(pd.Series(np.asarray(clusters)))[0]
    if a.shape != codes.shape or a.ndim != 1:
        raise ValueError("agree and clusters need one entry per label")
    c = int(codes.max()) + 1 if codes.size else 0
    return variance_components_from_sums(
        np.bincount(codes, minlength=c), np.bincount(codes, a, c), np.bincount(codes, a * a, c)
    )


def variance_components_from_sums(
    sizes: npt.ArrayLike, sums: npt.ArrayLike, squares: npt.ArrayLike
) -> VarianceComponents:
    """Return the ANOVA estimates of the variance components from each prompt's label count
    ``n_c``, sum ``S_c`` and sum of squares ``Q_c`` (for 0/1 agreement ``Q_c = S_c``).

    Formulas (Searle, Casella & McCulloch 1992, section 3.6): with ``N = sum n_c``, C prompts,
    means ``m_c = S_c / n_c`` and ``m = sum S_c / N``:
    ``MSW = sum_c (Q_c - S_c^2 / n_c) / (N - C)``, ``MSB = sum_c n_c (m_c - m)^2 / (C - 1)``,
    ``n0 = (N - sum_c n_c^2 / N) / (C - 1)``, ``s_w^2 = MSW`` and
    ``s_b^2 = max(0, (MSB - MSW) / n0)``. One prompt gives no between part (0); prompts of one
    label each give no within part, and ``s_w^2`` is then the labels' variance with ``s_b^2`` 0
    (the two cannot be told apart).
    """
    n_c = np.asarray(sizes, dtype=np.float64)
    s_c = np.asarray(sums, dtype=np.float64)
    q_c = np.asarray(squares, dtype=np.float64)
    if not n_c.shape == s_c.shape == q_c.shape or n_c.ndim != 1:
        raise ValueError("sizes, sums and squares need one entry per prompt")
    keep = n_c > 0
    n_c, s_c, q_c = n_c[keep], s_c[keep], q_c[keep]
    n = int(n_c.sum())
    c = int(n_c.size)
    if n == 0:
        return VarianceComponents(math.nan, math.nan, math.nan, 0, 0)
    grand = float(s_c.sum() / n)
    if n == c:
        spread = float((q_c.sum() - n * grand * grand) / (n - 1)) if n > 1 else 0.0
        return VarianceComponents(grand, 0.0, max(0.0, spread), n, c)
    msw = max(0.0, float((q_c - s_c**2 / n_c).sum()) / (n - c))
    if c == 1:
        return VarianceComponents(grand, 0.0, msw, n, c)
    means = s_c / n_c
    msb = float((n_c * (means - grand) ** 2).sum()) / (c - 1)
    n0 = (n - float((n_c**2).sum()) / n) / (c - 1)
    return VarianceComponents(grand, max(0.0, (msb - msw) / n0), msw, n, c)


def projected_half_width(
    components: VarianceComponents, *, labels: int, prompts: int, confidence: float = 0.95
) -> float:
    """The half width ``z sqrt(s_b^2 / C + s_w^2 / n)`` at ``labels`` labels on ``prompts``."""
    from scipy import stats as _st

    if labels <= 0 or prompts <= 0:
        return math.nan
    z = float(_st.norm.ppf(0.5 + confidence / 2.0))
    return z * math.sqrt(components.between / prompts + components.within / labels)


def floor_half_width(
    components: VarianceComponents, *, prompts: int, confidence: float = 0.95
) -> float:
    """The half width ``z sqrt(s_b^2 / C)`` that no number of labels on ``prompts`` prompts
    narrows the interval past (NaN without prompts)."""
    from scipy import stats as _st

    if prompts <= 0:
        return math.nan
    z = float(_st.norm.ppf(0.5 + confidence / 2.0))
    return z * math.sqrt(components.between / prompts)


def labels_for_half_width(
    components: VarianceComponents, *, target: float, prompts: int, confidence: float = 0.95
) -> int | None:
    """The fewest labels whose projected half width is at most ``target`` on ``prompts`` prompts:
    ``ceil(s_w^2 / ((target / z)^2 - s_b^2 / C))``; None when the floor ``z s_b / sqrt(C)``
    is at or above the target (no number of labels on these prompts reaches it)."""
    from scipy import stats as _st

    if target <= 0:
        raise ValueError("the target half width must be positive")
    z = float(_st.norm.ppf(0.5 + confidence / 2.0))
    room = (target / z) ** 2 - components.between / prompts
    if room <= 0:
        return None
    return max(1, math.ceil(components.within / room - 1e-9))


def rank_stability(
    battles: pd.DataFrame, *, sizes: Sequence[int], rounds: int = 50, seed: int = 0
) -> list[float]:
    """For each size n, the mean Kendall tau-b between the current leaderboard and ``rounds``
    leaderboards fitted on n battles drawn with replacement from the current ones; NaN without
    battles.

    The battles are counted into cells (pair of models, outcome), so a round is one multinomial
    draw of n battles over the cells (``rng = numpy.random.default_rng(seed)``,
    ``rng.multinomial(n, cell_counts / N)``): the distribution of n draws with replacement, at
    a cost that does not grow with n. Each round is fitted by the Bradley-Terry fit of
    :func:`leaderboard.stats.bradley_terry.bradley_terry` (ties as half a win, its ridge).
    """
    if battles.empty:
        return [math.nan for _ in sizes]
    cells = battles.groupby(["model_a", "model_b", "winner"], sort=True, observed=True).size()
    frame = cells.reset_index(name="count")
    models = sorted(set(frame["model_a"]) | set(frame["model_b"]))
    index = {name: i for i, name in enumerate(models)}
    ca = frame["model_a"].map(index).to_numpy(dtype=np.intp)
    cb = frame["model_b"].map(index).to_numpy(dtype=np.intp)
    score = np.asarray(frame["winner"].map(SCORE_A), dtype=np.float64)
    if np.isnan(score).any():
        raise ValueError("winner must be model_a, model_b or tie")
    counts = frame["count"].to_numpy(dtype=np.float64)
    current = win_matrix_strengths(ca, cb, score, counts, len(models))
    rng = np.random.default_rng(seed)
    out = []
    for size in sizes:
        taus = []
        for weight in rng.multinomial(size, counts / counts.sum(), size=rounds):
            strengths = win_matrix_strengths(ca, cb, score, weight.astype(np.float64), len(models))
            tau = correlation(current, strengths, "kendall").estimate
            if not math.isnan(tau):
                taus.append(tau)
        out.append(float(np.mean(taus)) if taus else math.nan)
    return out


def label_plan(
    agree: npt.ArrayLike,
    clusters: npt.ArrayLike,
    *,
    battles: pd.DataFrame | None = None,
    prompts: int | None = None,
    target_half_width: float | None = None,
    cents_per_judgment: int = 0,
    sizes: Sequence[int] | None = None,
    confidence: float = 0.95,
    rounds: int = 50,
    seed: int = 0,
) -> LabelPlan:
    """Return the plan for a judge's agreement with people (see the module docstring).

    ``prompts``: the prompts the study's labels will cover (default: those the current labels
    cover; larger for a pilot of part of the study). ``sizes``: the label counts to project
    (default: the current count times 1, 1.5, 2, 3, 4, 6 and 8, and the target's count).
    ``battles``: the people's votes as ``model_a, model_b, winner`` for the rank stability
    (none: NaN taus). ``cents_per_judgment``: the study's pay for one accepted judgment.
    """
    if cents_per_judgment < 0:
        raise ValueError("the pay per judgment cannot be negative")
    components = variance_components(agree, clusters)
    c = prompts if prompts is not None else components.prompts
    if c < components.prompts:
        raise ValueError(f"the study has labels on {components.prompts} prompts, not {c}")
    current = components.labels
    needed = additional = cost = None
    if target_half_width is not None:
        needed = labels_for_half_width(
            components, target=target_half_width, prompts=c, confidence=confidence
        )
        if needed is not None:
            additional = max(0, needed - current)
            cost = additional * cents_per_judgment
    if sizes is None:
        grid = {max(1, round(current * f)) for f in (1, 1.5, 2, 3, 4, 6, 8)} if current else set()
        if needed is not None:
            grid.add(max(needed, current))
        sizes = sorted(grid)
    taus = (
        rank_stability(battles, sizes=sizes, rounds=rounds, seed=seed)
        if battles is not None
        else [math.nan] * len(sizes)
    )
    points = tuple(
        PlanPoint(
            int(size),
            projected_half_width(components, labels=int(size), prompts=c, confidence=confidence),
            tau,
        )
        for size, tau in zip(sizes, taus, strict=True)
    )
    return LabelPlan(
        components=components,
        prompts=c,
        confidence=confidence,
        current_half_width=projected_half_width(
            components, labels=current, prompts=components.prompts, confidence=confidence
        ),
        floor_half_width=floor_half_width(components, prompts=c, confidence=confidence),
        target_half_width=target_half_width,
        labels_needed=needed,
        additional=additional,
        cost_cents=cost,
        points=points,
    )
