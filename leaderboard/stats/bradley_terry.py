"""Bradley-Terry ratings of models from pairwise battles: the penalised maximum likelihood fit of
a win matrix, on the Elo scale, with bootstrap percentiles.

Sources: R. A. Bradley & M. E. Terry (1952), "Rank analysis of incomplete block designs",
Biometrika 39:324-345; D. R. Hunter (2004), "MM algorithms for generalized Bradley-Terry
models", Ann. Statist. 32:384-406; the LMSYS Chatbot Arena notebook (Zheng et al. 2023).
:func:`bradley_terry` states the model, the ridge and the bootstrap; battles are those of
:mod:`leaderboard.stats.battles`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from leaderboard.stats.battles import (
    QUANTILES,
    EncodedBattles,
    empty_ratings,
    encode_battles,
    rating_frame,
)

if TYPE_CHECKING:
    import pandas as pd


def _cells(
    enc: EncodedBattles, ties: Literal["half", "drop"]
) -> tuple[
    npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.int64]
]:
    """Deduplicate battles into (a, b, score) cells with their counts."""
    keep = np.ones(len(enc.a), dtype=bool) if ties == "half" else enc.score_a != 0.5
    a, b, s = enc.a[keep], enc.b[keep], enc.score_a[keep]
    m = len(enc.models)
    cell = (a * m + b) * 3 + (2.0 * s).astype(np.intp)
    unique, counts = np.unique(cell, return_counts=True)
    pair, outcome = np.divmod(unique, 3)
    ca, cb = np.divmod(pair, m)
    return ca, cb, outcome / 2.0, counts.astype(np.int64)


def _cluster_cells(
    enc: EncodedBattles, ties: Literal["half", "drop"], clusters: npt.NDArray[Any], n_cells: int
) -> Callable[[np.random.Generator, int], npt.NDArray[np.float64]]:
    """For the cluster bootstrap: a function drawing each round's weight of each (a, b, score)
    cell of :func:`_cells`: the cells' battle counts per cluster (a clusters x cells matrix)
    times the counts of the clusters drawn with replacement."""
    import pandas as pd

    if len(clusters) != len(enc.a):
        raise ValueError("clusters must give one id per battle")
    keep = np.ones(len(enc.a), dtype=bool) if ties == "half" else enc.score_a != 0.5
    m = len(enc.models)
    cell = (enc.a[keep] * m + enc.b[keep]) * 3 + (2.0 * enc.score_a[keep]).astype(np.intp)
    _, cell_index = np.unique(cell, return_inverse=True)
    cluster_index, cluster_ids = pd.factorize(pd.Series(clusters[keep]), sort=True)
    n_clusters = len(cluster_ids)
    # Battles of each cell in each cluster: clusters x cells (the cells are few).
    per_cluster = (
        np.bincount(cluster_index * n_cells + cell_index, minlength=n_clusters * n_cells)
        .reshape(n_clusters, n_cells)
        .astype(np.float64)
    )

    def draw(rng: np.random.Generator, rounds: int) -> npt.NDArray[np.float64]:
        weights = np.empty((rounds, n_cells))
        step = max(1, 5_000_000 // max(n_clusters, 1))
        for start in range(0, rounds, step):
            size = min(step, rounds - start)
            # Each round picks n_clusters clusters uniformly with replacement, counted round by
            # round (a count that stays in cache).
            picks = rng.integers(0, n_clusters, size=(size, n_clusters))
            counts = np.empty((size, n_clusters))
            for row in range(size):
                counts[row] = np.bincount(picks[row], minlength=n_clusters)
            weights[start : start + size] = counts @ per_cluster
        return weights

    return draw


def _win_matrix(
    ca: npt.NDArray[np.intp],
    cb: npt.NDArray[np.intp],
    cs: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    m: int,
) -> npt.NDArray[np.float64]:
    """W[i, j] = wins of i over j, a tie counting half a win to each side."""
    wins = np.zeros(m * m)
    np.add.at(wins, ca * m + cb, weight * cs)
    np.add.at(wins, cb * m + ca, weight * (1.0 - cs))
    return wins.reshape(m, m)


def _fit_bt(wins: npt.NDArray[np.float64], ridge: float) -> npt.NDArray[np.float64]:
    """Maximise sum W_ij log sigmoid(t_i - t_j) - ridge/2 |t|² by damped Newton steps."""
    m = wins.shape[0]
    games = wins + wins.T
    theta = np.zeros(m)

    def objective(t: npt.NDArray[np.float64]) -> float:
        diff = t[:, None] - t[None, :]
        return float((wins * np.logaddexp(0.0, -diff)).sum() + 0.5 * ridge * (t @ t))

    current = objective(theta)
    for _ in range(200):
        prob = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        grad = -(wins - games * prob).sum(axis=1) + ridge * theta
        curvature = games * prob * prob.T
        hess = np.diag(curvature.sum(axis=1) + ridge) - curvature
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while True:
            candidate = theta - size * step
            value = objective(candidate)
            if value <= current or size < 1e-10:
                break
            size /= 2.0
        theta, previous, current = candidate, current, value
        if np.abs(size * step).max() < 1e-10 or previous - current < 1e-14 * max(1.0, current):
            break
    return theta


def win_matrix_strengths(
    ca: npt.NDArray[np.intp],
    cb: npt.NDArray[np.intp],
    score: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    m: int,
    ridge: float = 1e-4,
) -> npt.NDArray[np.float64]:
    """Return the Bradley-Terry strengths (natural scale, mean 0) of weighted battle cells: cell
    k is model ``ca[k]`` against ``cb[k]`` with the first's score ``score[k]`` (1, 0.5, 0) and
    weight ``weight[k]``, fitted as :func:`bradley_terry` fits its win matrix."""
    return _fit_bt(_win_matrix(ca, cb, score, weight, m), ridge)


def bradley_terry(
    battles: pd.DataFrame,
    *,
    ties: Literal["half", "drop"] = "half",
    rounds: int = 0,
    seed: int = 0,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
    anchor: str | None = None,
    ridge: float = 1e-4,
    clusters: npt.ArrayLike | None = None,
) -> pd.DataFrame:
    """Return Bradley-Terry ratings on the Elo scale, with bootstrap percentiles when rounds > 0.

    Model: ``P(i beats j) = 1 / (1 + base ** ((R_j - R_i) / scale))``, i.e. strengths
    ``t_i = R_i ln(base) / scale`` in ``P = sigmoid(t_i - t_j)``. The battles are first counted
    into a win matrix ``W`` (``ties="half"``: a tie is half a win each; ``"drop"``: ties are
    removed), then ``sum_ij W_ij log sigmoid(t_i - t_j) - ridge/2 sum_i t_i²`` is maximised by
    Newton's method. Sources: R. A. Bradley & M. E. Terry (1952), "Rank analysis of incomplete
    block designs", Biometrika 39:324-345; D. R. Hunter (2004), "MM algorithms for generalized
    Bradley-Terry models", Ann. Statist. 32:384-406; the LMSYS Chatbot Arena notebook.

    The ridge term is a N(0, 1/ridge) prior on the strengths: it makes the optimum unique and
    finite when a model never loses (the plain MLE diverges to infinity) or when the comparison
    graph is disconnected, and moves well-determined ratings by a negligible amount.

    Anchor: the ridge optimum has strengths of mean 0, so the mean rating is ``init`` (1000); with
    ``anchor`` naming a model, ratings are shifted so that model is rated ``init``.

    ``rating`` is the fit on all battles. With ``rounds > 0``, ``lower`` and ``upper`` are the
    2.5th / 97.5th percentiles over bootstrap refits. Each round reweights the n battles by
    multinomial counts, drawn per deduplicated outcome cell (same pair, same outcome) as
    ``rng.multinomial(n, cell_counts / n)`` with ``rng = default_rng(seed)``: the same
    distribution as multinomial(n, 1/n) weights per battle, summed within each cell. A model
    absent from a round's sample is skipped for that round. With ``clusters`` (one id per battle,
    for example its prompt), a round draws the C clusters instead, C times uniformly with
    replacement, each battle weighted by how often its cluster was drawn (the cluster, or block,
    bootstrap: Efron & Tibshirani 1993, "An Introduction to the Bootstrap", section 8.5;
    battles on one prompt are not independent). With ``rounds=0``, lower and upper
    are NaN (no interval is computed). Models left without battles (``ties="drop"`` removing
    all their battles) are not listed.
    Columns model, rating, lower, upper, sorted by rating descending.
    """
    if ties not in ("half", "drop"):
        raise ValueError("ties must be 'half' or 'drop'")
    if rounds < 0:
        raise ValueError("rounds must be non-negative")
    if ridge <= 0:
        raise ValueError("ridge must be positive so that the ratings stay finite")
    enc = encode_battles(battles)
    ca, cb, cs, counts = _cells(enc, ties)
    if counts.size == 0:
        return empty_ratings()
    cluster_draw = None
    if clusters is not None:
        cluster_draw = _cluster_cells(enc, ties, np.asarray(clusters), len(counts))
    used = np.unique(np.concatenate([ca, cb]))
    remap = np.full(len(enc.models), -1, dtype=np.intp)
    remap[used] = np.arange(used.size)
    ca, cb = remap[ca], remap[cb]
    models = [enc.models[i] for i in used]
    m = len(models)
    if anchor is not None and anchor not in models:
        raise ValueError(f"anchor model {anchor!r} has no battles")
    to_rating = scale / math.log(base)

    def ratings_for(weight: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        wins = _win_matrix(ca, cb, cs, weight, m)
        theta = _fit_bt(wins, ridge) * to_rating
        if anchor is not None:
            theta = theta - theta[models.index(anchor)]
        result: npt.NDArray[np.float64] = theta + init
        return result

    point = ratings_for(counts.astype(np.float64))
    lower = np.full(m, np.nan)
    upper = np.full(m, np.nan)
    if rounds > 0:
        n = int(counts.sum())
        rng = np.random.default_rng(seed)
        if cluster_draw is None:
            draws = rng.multinomial(n, counts / n, size=rounds).astype(np.float64)
        else:
            draws = cluster_draw(rng, rounds)
        boot = np.empty((rounds, m))
        for r in range(rounds):
            boot[r] = ratings_for(draws[r])
            games = np.zeros(m)
            np.add.at(games, ca, draws[r])
            np.add.at(games, cb, draws[r])
            boot[r, games == 0] = np.nan
        lower, upper = np.nanquantile(boot, [QUANTILES[0], QUANTILES[2]], axis=0)
    return rating_frame(models, point, lower, upper)
