"""Rankings that control for style: AlpacaEval 2.0's length-controlled win rates and LMArena's
style-controlled (contextual) Bradley-Terry ratings, with intervals over prompts.

Both models are logistic regressions of a vote on model terms and style terms; the ranking is
read with the style terms set to zero, i.e. as if the two answers had had the same length and
markdown. Sources: Y. Dubois, B. Galambosi, P. Liang & T. B. Hashimoto (2024),
"Length-Controlled AlpacaEval: A Simple Way to Debias Automatic Evaluators" (the ``alpaca_eval``
package's ``metrics/glm_winrate.py``), and T. Li, A. Angelopoulos, W.-L. Chiang et al. (2024),
"Does style matter? Disentangling style and substance in Chatbot Arena" (the LMArena blog post;
the ``arena-rank`` package's ``ContextualBradleyTerry``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.stats.bootstrap import cluster_sums, percentile_interval

# The style features of an answer, in the order of LMArena's style control: its length in
# tokens (here whitespace-separated words), its markdown headers, list items and bold spans.
STYLE_FEATURES = ("tokens", "headers", "lists", "bold")
# Elo points per unit of a Bradley-Terry strength (arena-rank's scale 400 and base 10).
ELO_SCALE = 400.0 / math.log(10.0)
ELO_OFFSET = 1000.0


@dataclass(frozen=True)
class Estimate:
    """A value with its interval (``lower``/``upper`` None when there is none)."""

    value: float
    lower: float | None
    upper: float | None


@dataclass(frozen=True)
class LengthControlled:
    """One model's win rate against the baseline, raw and length-controlled.

    ``votes`` decisive or tied votes on pairs of the model and the baseline, over ``prompts``
    prompts; ``win_rate`` their mean score (a tie half a win); ``length_controlled`` the GLM's
    win rate with the length term at zero; ``length_coefficient`` the GLM's weight of
    ``tanh(standardised length difference)`` (positive: the longer answer is preferred; None when
    the lengths never differ); ``rounds`` the bootstrap rounds behind the intervals.
    """

    votes: int
    prompts: int
    win_rate: Estimate
    length_controlled: Estimate
    length_coefficient: Estimate | None
    rounds: int


def _logistic_fit(
    design: npt.NDArray[np.float64],
    target: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    ridge: npt.NDArray[np.float64],
    start: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Minimise ``-sum_i w_i [y_i s_i - log(1 + e^{s_i})] + 1/2 sum_k ridge_k b_k^2`` with
    ``s = design @ b`` by Newton's method with step halving (the objective is convex)."""
    from scipy.special import expit

    beta = np.zeros(design.shape[1]) if start is None else start.copy()

    def loss(b: npt.NDArray[np.float64]) -> float:
        s = design @ b
        return float(-(weight * (target * s - np.logaddexp(0.0, s))).sum() + 0.5 * ridge @ b**2)

    current = loss(beta)
    for _ in range(100):
        p = expit(design @ beta)
        grad = design.T @ (weight * (p - target)) + ridge * beta
        if np.abs(grad).max() < 1e-10 * max(1.0, weight.sum()):
            break
        hess = (design * (weight * p * (1 - p))[:, None]).T @ design + np.diag(ridge)
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while size > 1e-8:
            trial = beta - size * step
            value = loss(trial)
            if value <= current + 1e-12 * abs(current):
                beta, current = trial, value
                break
            size /= 2
        else:
            break
    return beta


def length_controlled_win_rate(
    outcome: npt.ArrayLike,
    length_model: npt.ArrayLike,
    length_baseline: npt.ArrayLike,
    clusters: npt.ArrayLike,
    *,
    rounds: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    ridge: float = 1e-6,
) -> LengthControlled:
    """Return a model's raw and length-controlled win rate against a baseline.

    ``outcome[i]`` is vote i's score for the model (1 it won, 0.5 a tie, 0 the baseline won),
    ``length_model[i]`` / ``length_baseline[i]`` the two answers' lengths and ``clusters[i]``
    the vote's prompt. Model (AlpacaEval 2.0's GLM, Dubois et al. 2024, Eq. 2, with the
    instruction-difficulty term left out as in alpaca_eval's ``length_controlled_minimal``):

        P(model preferred) = sigmoid(theta + phi * tanh((len_model - len_baseline) / sd)),

    ``sd`` the standard deviation (n - 1) of the length differences over the votes, fitted by
    maximum likelihood with the outcome as a probability (a tie is y = 0.5) and a ridge of
    ``ridge`` on (theta, phi) so that a model that always wins stays finite. The
    length-controlled win rate is the model's predicted preference with the length term at
    zero, ``sigmoid(theta)``; the raw one ``mean(outcome)``. alpaca_eval fits the same
    likelihood with an L1 penalty whose strength it picks by 5-fold cross-validation; its
    AlpacaEval length difference is baseline minus model, so its phi has the opposite sign.

    Intervals: percentiles over bootstrap rounds that draw the prompts with replacement
    (:func:`leaderboard.stats.bootstrap.cluster_sums` of per-prompt sums, seed ``seed``). A
    round's estimate is one Newton step from the full-data fit with the round's gradient and
    Hessian, ``(theta, phi)* = (theta, phi) - H*^-1 g*``, the linearised (estimating function)
    bootstrap of F. Hu & J. D. Kalbfleisch (2000), "The estimating function bootstrap", Canadian
    Journal of Statistics 28:449-481: a refit would cost a Newton fit per round; within a
    sample's own sampling spread the two agree (tests/leaderboard/stats/test_style_control.py).
    """
    import pandas as pd
    from scipy.special import expit

    y = np.asarray(outcome, dtype=np.float64)
    lm = np.asarray(length_model, dtype=np.float64)
    lb = np.asarray(length_baseline, dtype=np.float64)
    if not (y.ndim == 1 and y.shape == lm.shape == lb.shape):
        raise ValueError("outcome and lengths must be 1-D arrays of one length")
    if ((y < 0) | (y > 1)).any():
        raise ValueError("outcomes must lie in [0, 1]")
    codes, _ = pd.factorize(np.asarray(clusters))
    if codes.shape != y.shape:
        raise ValueError("need one cluster per vote")
    n_clusters = int(codes.max()) + 1 if codes.size else 0
    if y.size == 0:
        nothing = Estimate(math.nan, None, None)
        return LengthControlled(0, 0, nothing, nothing, None, 0)
    diff = lm - lb
    sd = float(np.std(diff, ddof=1)) if diff.size > 1 else 0.0
    has_length = math.isfinite(sd) and sd > 0
    columns = [np.ones_like(y)]
    if has_length:
        columns.append(np.tanh(diff / sd))
    design = np.column_stack(columns)
    k = design.shape[1]
    ridges = np.full(k, ridge)
    weight = np.ones_like(y)
    beta = _logistic_fit(design, y, weight, ridges)
    p = expit(design @ beta)
    # Per prompt: votes, outcome sum, gradient (k) and Hessian (k x k) of the likelihood part.
    parts = [weight, y, *(design[:, j] * (p - y) for j in range(k))]
    curvature = p * (1 - p)
    parts += [design[:, i] * design[:, j] * curvature for i in range(k) for j in range(k)]
    rows = np.zeros((n_clusters, len(parts)))
    for j, values in enumerate(parts):
        rows[:, j] = np.bincount(codes, weights=values, minlength=n_clusters)
    win_rate = float(y.mean())
    lc = float(expit(beta[0]))
    if n_clusters < 2 or rounds < 1:
        return LengthControlled(
            y.size,
            n_clusters,
            Estimate(win_rate, None, None),
            Estimate(lc, None, None),
            Estimate(float(beta[1]), None, None) if has_length else None,
            0,
        )
    sums = cluster_sums(rows, rounds=rounds, seed=seed)
    grads = sums[:, 2 : 2 + k] + ridges * beta
    hessians = sums[:, 2 + k :].reshape(rounds, k, k) + np.diag(ridges)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = sums[:, 1] / sums[:, 0]
        steps = np.linalg.solve(hessians, grads[:, :, None])[:, :, 0]
    draws = beta - steps

    def interval(value: float, replicates: npt.NDArray[np.float64]) -> Estimate:
        got = percentile_interval(
            value, replicates, confidence=confidence, seed=seed, clusters=n_clusters
        )
        return Estimate(value, got.lower, got.upper)

    return LengthControlled(
        y.size,
        n_clusters,
        interval(win_rate, raw),
        interval(lc, expit(draws[:, 0])),
        interval(float(beta[1]), draws[:, 1]) if has_length else None,
        rounds,
    )


def style_differences(first: npt.ArrayLike, second: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return LMArena's normalised style differences ``(a - b) / (a + b)`` per feature.

    ``first`` and ``second`` are n x k counts of the two answers of n votes (0 where both are
    0). Source: LMArena's style control (Li et al. 2024; FastChat's ``elo_analysis.py``), whose
    features are the normalised differences of token length and of header, list and bold
    counts, then standardised (:func:`contextual_bradley_terry` standardises them)."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    total = a + b
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (a - b) / np.where(total > 0, total, 1.0), 0.0)


@dataclass(frozen=True)
class ContextualBT:
    """A contextual Bradley-Terry fit: ratings on the Elo scale and style coefficients.

    ``ratings[m]`` model m's rating with the style terms at zero (mean 1000); ``coefficients[f]``
    feature f's weight in logits per standard deviation of its normalised difference (positive:
    the answer with more of it is preferred), each with its normal interval from the
    cluster-robust sandwich; ``battles`` the votes fitted, ``clusters`` the prompts (or battles)
    the covariance summed over; ``scale`` the features' means and standard deviations.
    """

    models: tuple[str, ...]
    ratings: dict[str, Estimate]
    coefficients: dict[str, Estimate]
    battles: int
    clusters: int
    feature_mean: dict[str, float]
    feature_sd: dict[str, float]


def contextual_bradley_terry(
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    features: npt.ArrayLike,
    *,
    feature_names: tuple[str, ...],
    clusters: npt.ArrayLike | None = None,
    counts: npt.ArrayLike | None = None,
    models: Sequence[str] | None = None,
    confidence: float = 0.95,
    reg: float = 1e-4,
    ridge_ratings: float = 1e-6,
    normalize: bool = True,
) -> ContextualBT:
    """Fit Bradley-Terry ratings beside style coefficients (LMArena's style control).

    Battle i between ``model_a[i]`` and ``model_b[i]`` has outcome y_i (1: a won, 0.5: tie,
    0: b won) and features f_i (a row of ``features``, standardised to mean 0 and standard
    deviation 1 over the battles when ``normalize``; a feature equal on every battle is left
    out of the fit and its coefficient is NaN). Model
    (arena-rank's ContextualBradleyTerry; Li et al. 2024):

        P(a beats b) = sigmoid(r_a - r_b + f_i . beta),

    fitted by minimising ``-(1/n) sum_i [y_i s_i - log(1 + e^{s_i})] + reg/2 |beta|^2 +
    ridge_ratings/2 |r|^2`` (the mean log-likelihood and ridge of arena-rank, whose ratings are
    unpenalised: ``ridge_ratings`` only keeps a model that never loses finite, and makes the
    ratings' mean 0 as arena-rank's L-BFGS from zero leaves it). Ratings are reported on the
    Elo scale, ``1000 + r * 400 / ln 10``. With no feature columns it is the plain
    Bradley-Terry model.

    Intervals: ``estimate +- z * se`` with the covariance ``V = H^-1 M H^-1`` (the sandwich),
    H the objective's Hessian on the sum scale and ``M = sum_c g_c g_c^T - (sum_c g_c)(sum_c
    g_c)^T / C`` over the clusters' summed score vectors g_c (with ``clusters`` the votes'
    prompts: the cluster-robust covariance of A. C. Cameron & D. L. Miller (2015), "A
    practitioner's guide to cluster-robust inference", J. Human Resources 50:317-372; without,
    each battle its own cluster, arena-rank's ``ci_method="sandwich"``). Fewer than two
    clusters: no intervals. ``counts[i]`` (default 1) says how many identical battles row i
    stands for (votes of one pair with one outcome, counted once): the fit, the features'
    standardisation and the sandwich weigh the row by it, as that many rows would. With
    ``models``, ``model_a`` and ``model_b`` are integer positions in it (no names to factorise).
    """
    import pandas as pd
    from scipy.sparse import coo_matrix
    from scipy.special import expit
    from scipy.stats import norm

    y = np.asarray(outcome, dtype=np.float64)
    feats = np.asarray(features, dtype=np.float64).reshape(len(y), len(feature_names))
    if models is None:
        names = pd.concat(
            [
                pd.Series(np.asarray(model_a, dtype=object)),
                pd.Series(np.asarray(model_b, dtype=object)),
            ]
        ).astype(str)
        codes, uniques = pd.factorize(names, sort=True)
        models = tuple(str(x) for x in uniques)
        if len(codes) != 2 * len(y):
            raise ValueError("model_a, model_b and outcome must have one length")
        ia, ib = codes[: len(y)], codes[len(y) :]
    else:
        models = tuple(models)
        ia = np.asarray(model_a, dtype=np.int64)
        ib = np.asarray(model_b, dtype=np.int64)
        if not (ia.shape == ib.shape == y.shape):
            raise ValueError("model_a, model_b and outcome must have one length")
    if (ia == ib).any():
        raise ValueError("a battle of a model against itself carries no information")
    count = np.ones(len(y)) if counts is None else np.asarray(counts, dtype=np.float64)
    if count.shape != y.shape or (count <= 0).any():
        raise ValueError("counts must give a positive count per row")
    n, m, k = len(y), len(models), len(feature_names)
    total_count = float(count.sum())
    mean = (count @ feats) / total_count if n else np.zeros(k)
    sd = np.sqrt((count @ (feats - mean) ** 2) / total_count) if n else np.ones(k)
    varies = sd > 0
    sd = np.where(varies, sd, 1.0)
    if normalize:
        feats = (feats - mean) / sd
    if n == 0:
        return ContextualBT(models, {}, {}, 0, 0, {}, {})
    # A feature equal on every battle (all answers alike in it) has no coefficient: it is left
    # out of the fit and reported as NaN.
    fitted_names = tuple(name for name, v in zip(feature_names, varies, strict=True) if v)
    feats = feats[:, varies]
    k = feats.shape[1]
    # Rows alike in models, outcome and features are fitted once with their summed count; each
    # battle's score vector is its distinct row's (for the sandwich's per-cluster sums).
    key = pd.DataFrame({"a": ia, "b": ib, "y": y, **{f"f{j}": feats[:, j] for j in range(k)}})
    row_of = key.groupby(list(key.columns), sort=False).ngroup().to_numpy()
    distinct = np.zeros(int(row_of.max()) + 1, dtype=np.int64)
    distinct[row_of] = np.arange(n)
    merged = np.bincount(row_of, weights=count)
    ua, ub, uy, uf = ia[distinct], ib[distinct], y[distinct], feats[distinct]
    rows_u = np.arange(len(distinct))
    design = np.zeros((len(distinct), m + k))
    design[rows_u, ua] = 1.0
    design[rows_u, ub] = -1.0
    design[:, m:] = uf
    # The mean log-likelihood: each battle weighs 1/n; the ridges are per parameter.
    ridges = np.concatenate([np.full(m, ridge_ratings), np.full(k, reg)])
    theta = _logistic_fit(design, uy, merged / total_count, ridges)
    p = expit(design @ theta)
    unique_scores = design * (p - uy)[:, None]  # one battle's score vector, on the sum scale
    hess = (design * (merged * p * (1 - p))[:, None]).T @ design + total_count * np.diag(ridges)
    if clusters is None:
        # Each battle its own cluster: row i holds counts[i] equal score vectors.
        n_groups = int(round(total_count))
        total = merged @ unique_scores
        meat = (unique_scores * merged[:, None]).T @ unique_scores
        meat -= np.outer(total, total) / n_groups
    else:
        group, _ = pd.factorize(np.asarray(clusters))
        if group.shape != (n,):
            raise ValueError("need one cluster per battle")
        n_groups = int(group.max()) + 1
        # Battles counted per (cluster, distinct row), then their score vectors summed.
        per_cell = coo_matrix((count, (group, row_of)), shape=(n_groups, len(distinct)))
        sums = np.asarray(per_cell.tocsr() @ unique_scores)
        total = sums.sum(axis=0)
        meat = sums.T @ sums - np.outer(total, total) / n_groups
    lower = upper = None
    if n_groups >= 2:
        inverse = np.linalg.inv(hess)
        se = np.sqrt(np.clip(np.diag(inverse @ meat @ inverse), 0.0, None))
        z = float(norm.ppf(0.5 + confidence / 2.0))
        lower, upper = theta - z * se, theta + z * se

    def estimate(j: int, to: float = 1.0, at: float = 0.0) -> Estimate:
        if lower is None or upper is None:
            return Estimate(at + to * float(theta[j]), None, None)
        return Estimate(
            at + to * float(theta[j]), at + to * float(lower[j]), at + to * float(upper[j])
        )

    return ContextualBT(
        models=models,
        ratings={name: estimate(i, ELO_SCALE, ELO_OFFSET) for i, name in enumerate(models)},
        coefficients={
            name: estimate(m + fitted_names.index(name))
            if name in fitted_names
            else Estimate(math.nan, None, None)
            for name in feature_names
        },
        battles=int(round(total_count)),
        clusters=n_groups,
        feature_mean={name: float(mean[j]) for j, name in enumerate(feature_names)},
        feature_sd={name: float(sd[j]) for j, name in enumerate(feature_names)},
    )
