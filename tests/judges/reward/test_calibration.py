"""Temperature scaling of PL scores: the fit recovers a known temperature, the rule bins it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from judges.reward.calibration import (
    artifact_temperature,
    likert_from_probability,
    mean_nll,
    pair_differences,
    probability_b,
    temperature_fit,
)


def _pairs_at(temperature: float, n: int, seed: int) -> np.ndarray:
    """Score differences d = h_first - h_second whose first side wins with
    P = sigmoid(d / T), written as h_better - h_worse of the outcome drawn."""
    rng = np.random.default_rng(seed)
    d = rng.normal(0.0, 3.0, size=n)
    first_wins = rng.random(n) < expit(d / temperature)
    return np.where(first_wins, d, -d)


@pytest.mark.parametrize("temperature", [0.4, 1.0, 2.5])
def test_the_fit_recovers_the_temperature_pairs_were_drawn_from(temperature: float) -> None:
    fit = temperature_fit(_pairs_at(temperature, 20_000, seed=7))
    assert fit is not None
    assert fit.temperature == pytest.approx(temperature, rel=0.06)
    assert fit.pairs == 20_000
    assert fit.nll_calibrated <= fit.nll_raw + 1e-12


def test_the_fit_on_a_hand_example_is_the_closed_form_minimum() -> None:
    # Two pairs, d = +1 won by the higher side and d = +1 lost (written -1), plus one d = +1 win
    # of weight 2: the first side wins with share p = 3/4 at d = 1, so sigmoid(1 / T) = 3/4,
    # T = 1 / log(3).
    fit = temperature_fit([1.0, -1.0, 1.0], [1.0, 1.0, 2.0])
    assert fit is not None
    assert fit.temperature == pytest.approx(1 / math.log(3), rel=1e-4)
    assert fit.nll_calibrated == pytest.approx(
        -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), rel=1e-6
    )
    assert mean_nll(np.array([0.0]), np.array([1.0]), 3.0) == pytest.approx(math.log(2))
    assert temperature_fit([], []) is None
    assert temperature_fit([1.0], [0.0]) is None


def test_held_out_lists_and_pairs_become_ranked_differences() -> None:
    scores = np.array([3.0, 1.0, 0.0, 5.0])
    diffs, weights = pair_differences(scores, [(0, 1, 2)], [(3, 0, 0.5)])
    assert diffs.tolist() == [2.0, 3.0, 1.0, 2.0]
    assert weights.tolist() == [1.0, 1.0, 1.0, 0.5]


def test_the_likert_rule_reads_the_calibrated_probability() -> None:
    # h_B - h_A = 0.4: raw P = 0.599 is a tie (5); with T = 0.2 P = sigmoid(2) = 0.881 -> 8.
    assert likert_from_probability(probability_b(0.0, 0.4)) == 5
    assert probability_b(0.0, 0.4, 0.2) == pytest.approx(expit(2.0))
    assert likert_from_probability(probability_b(0.0, 0.4, 0.2)) == 8
    # With T = 4 a difference of 4 is P = sigmoid(1) = 0.731 -> 6, not 8.
    assert likert_from_probability(probability_b(0.0, 4.0, 4.0)) == 6
    assert likert_from_probability(probability_b(4.0, 0.0, 4.0)) == 3
    with pytest.raises(ValueError):
        probability_b(0.0, 1.0, 0.0)


def test_a_calibrated_rule_ties_as_often_as_the_held_out_pairs_say() -> None:
    """On pairs drawn at T = 0.25 the raw rule calls many pairs ties that the model's odds
    decide; after the fit the tie share is what sigmoid(d / T) in [3/8, 5/8) gives."""
    diffs = _pairs_at(0.25, 5_000, seed=3)
    fit = temperature_fit(diffs)
    assert fit is not None

    def tie_share(temperature: float) -> float:
        likerts = [likert_from_probability(probability_b(0.0, d, temperature)) for d in diffs]
        return sum(1 for x in likerts if x in (4, 5)) / len(likerts)

    expected = float(np.mean(np.abs(diffs) / 0.25 < math.log(5 / 3)))
    assert tie_share(fit.temperature) == pytest.approx(expected, abs=0.01)
    assert tie_share(1.0) > 3 * tie_share(fit.temperature)


def test_an_artifact_without_a_temperature_is_uncalibrated() -> None:
    assert artifact_temperature({"format": 1}) is None
    assert artifact_temperature({"temperature": None}) is None
    assert artifact_temperature({"temperature": 0.5}) == 0.5
