"""Temperature scaling of a PL model's scores, and the Likert rule of the calibrated probability.

A PL model's scores h are trained only to rank, so sigmoid(h_B - h_A) is not a probability
anyone measured. Temperature scaling (Guo et al. 2017, "On calibration of modern neural
networks", section 4.2) fits one number T > 0 by maximum likelihood on held-out pairs and reads

    P(B better) = sigmoid((h_B - h_A) / T).

On held-out pairs (better, worse, weight) with differences d_i = h_better - h_worse, the fitted
T minimises the weighted negative log-likelihood

    NLL(T) = sum_i w_i * log(1 + exp(-d_i / T)),

a one-dimensional problem solved on log T (bounded, scipy's minimize_scalar). T > 1 says the
raw scores are over-confident, T < 1 that they are under-confident. Dividing by T keeps every
order: it changes how sure a verdict is, never which side it favours.

The Likert rule (:func:`likert_from_probability`) bins the calibrated probability in eight equal
bins, likert = min(8, floor(8 P) + 1): P < 1/8 -> 1 (A much better), ..., 3/8 <= P < 5/8 -> 4 or
5 (a tie), ..., P >= 7/8 -> 8 (B much better). Calibrated, a tie means the model's held-out odds
for either side are under 5:3, not that |h_B - h_A| fell under an arbitrary 0.51.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

UNCALIBRATED = 1.0
LOG_T_BOUNDS = (-6.0, 6.0)


@dataclass(frozen=True)
class Calibration:
    """A fitted temperature and how well it fits the held-out pairs."""

    temperature: float
    pairs: int
    nll_raw: float
    nll_calibrated: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "temperature": self.temperature,
            "pairs": self.pairs,
            "nll_raw": self.nll_raw,
            "nll_calibrated": self.nll_calibrated,
        }


def sigmoid(x: float) -> float:
    """1 / (1 + exp(-x)), computed without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def mean_nll(diffs: np.ndarray, weights: np.ndarray, temperature: float) -> float:
    """Weighted mean of log(1 + exp(-d / T)) over pairs with d = h_better - h_worse."""
    return float(np.sum(weights * np.logaddexp(0.0, -diffs / temperature)) / np.sum(weights))


def temperature_fit(
    diffs: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None
) -> Calibration | None:
    """The maximum-likelihood temperature of pairs with score differences d = h_better - h_worse.

    None when there is no pair of positive weight. When every pair is ranked right by a wide
    margin the likelihood keeps growing as T shrinks; the bound exp(-6) then stops it.
    """
    from scipy.optimize import minimize_scalar

    d = np.asarray(diffs, dtype=np.float64)
    w = np.ones_like(d) if weights is None else np.asarray(weights, dtype=np.float64)
    keep = w > 0
    d, w = d[keep], w[keep]
    if d.size == 0:
        return None
    result = minimize_scalar(
        lambda log_t: mean_nll(d, w, math.exp(log_t)),
        bounds=LOG_T_BOUNDS,
        method="bounded",
        options={"xatol": 1e-6},
    )
    temperature = float(math.exp(result.x))
    return Calibration(
        temperature=temperature,
        pairs=int(d.size),
        nll_raw=mean_nll(d, w, 1.0),
        nll_calibrated=mean_nll(d, w, temperature),
    )


def pair_differences(
    scores: np.ndarray,
    lists: Sequence[Sequence[int]],
    pairs: Sequence[tuple[int, int, float]],
) -> tuple[np.ndarray, np.ndarray]:
    """h_better - h_worse and the weight of every ranked pair: each list's pairs (i above j,
    weight 1) and the human pairs (better, worse, weight)."""
    diffs: list[float] = []
    weights: list[float] = []
    for ids in lists:
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                diffs.append(float(scores[ids[i]] - scores[ids[j]]))
                weights.append(1.0)
    for better, worse, weight in pairs:
        diffs.append(float(scores[better] - scores[worse]))
        weights.append(float(weight))
    return np.asarray(diffs, dtype=np.float64), np.asarray(weights, dtype=np.float64)


def probability_b(score_a: float, score_b: float, temperature: float = UNCALIBRATED) -> float:
    """P(B better) = sigmoid((h_B - h_A) / T)."""
    if not temperature > 0:
        raise ValueError(f"a temperature is positive, not {temperature}")
    return sigmoid((score_b - score_a) / temperature)


def likert_from_probability(p: float) -> int:
    """The Likert 1-8 of P(B better): min(8, floor(8 P) + 1), eight equal bins (see the module)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a probability is in [0, 1], not {p}")
    return min(8, math.floor(8 * p) + 1)


def artifact_temperature(metadata: dict[str, object]) -> float | None:
    """The fitted temperature an artifact's metadata holds, None for an uncalibrated one."""
    value = metadata.get("temperature")
    if isinstance(value, (int, float)) and value > 0:
        return float(value)
    return None
