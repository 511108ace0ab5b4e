import math

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.bradley_terry import bradley_terry, win_matrix_strengths
from leaderboard.stats.planning import (
    label_plan,
    labels_for_half_width,
    projected_half_width,
    rank_stability,
    variance_components,
)


def test_variance_components_by_hand() -> None:
    # Prompt p: 1 1 1 0 (mean 0.75), prompt q: 0 0 (mean 0); grand mean 3/6 = 0.5.
    # SSW = 3 * 0.0625 + 0.5625 = 0.75, MSW = 0.75 / (6 - 2) = 0.1875;
    # MSB = (4 * 0.0625 + 2 * 0.25) / 1 = 0.75; n0 = (6 - (16 + 4) / 6) / 1 = 8/3;
    # s_b^2 = (0.75 - 0.1875) / (8/3) = 0.2109375.
    comp = variance_components([1, 1, 1, 0, 0, 0], ["p", "p", "p", "p", "q", "q"])
    assert comp.mean == pytest.approx(0.5)
    assert comp.within == pytest.approx(0.1875)
    assert comp.between == pytest.approx(0.2109375)
    assert (comp.labels, comp.prompts) == (6, 2)


def test_a_between_estimate_below_zero_is_zero() -> None:
    # Two prompts with the same mean: MSB = 0 < MSW.
    comp = variance_components([1, 0, 1, 0], ["p", "p", "q", "q"])
    assert comp.between == 0.0
    assert comp.within == pytest.approx(0.5)


def _study(rng: np.random.Generator, prompts: int, per_prompt: int, rates: np.ndarray) -> tuple:
    agree = (rng.random((prompts, per_prompt)) < rates[:, None]).astype(float).ravel()
    clusters = np.repeat(np.arange(prompts), per_prompt)
    return agree, clusters


def test_the_projected_width_matches_the_spread_of_simulated_studies_of_that_size() -> None:
    # Known truth: prompts whose agreement rates are 0.45 or 0.85 with equal chance (between
    # variance 0.04), labels Bernoulli within a prompt (within variance E[p(1-p)] = 0.18).
    rng = np.random.default_rng(7)
    prompts = 80
    agree, clusters = _study(rng, prompts, 10, rng.choice([0.45, 0.85], size=prompts))
    comp = variance_components(agree, clusters)
    assert comp.between == pytest.approx(0.04, abs=0.02)
    assert comp.within == pytest.approx(0.18, abs=0.02)
    # Projected from 10 labels a prompt to 40, against 400 simulated studies of 40 a prompt.
    projected = projected_half_width(comp, labels=prompts * 40, prompts=prompts)
    means = []
    for _ in range(400):
        sample, _ = _study(rng, prompts, 40, rng.choice([0.45, 0.85], size=prompts))
        means.append(sample.mean())
    assert projected == pytest.approx(1.96 * float(np.std(means, ddof=1)), rel=0.25)
    # The floor is real: a hundred times the labels on the same prompts barely narrows it.
    far = projected_half_width(comp, labels=prompts * 4000, prompts=prompts)
    assert far > 0.75 * projected


def test_the_labels_needed_reach_the_target_and_one_fewer_does_not() -> None:
    rng = np.random.default_rng(3)
    rates = rng.uniform(0.5, 0.9, 200)
    agree, clusters = _study(rng, 200, 5, rates)
    comp = variance_components(agree, clusters)
    target = 0.03
    needed = labels_for_half_width(comp, target=target, prompts=200)
    assert needed is not None
    assert projected_half_width(comp, labels=needed, prompts=200) <= target
    assert projected_half_width(comp, labels=needed - 1, prompts=200) > target


def test_a_target_below_the_prompts_floor_is_unreachable_and_said_so() -> None:
    rng = np.random.default_rng(4)
    rates = np.where(np.arange(20) % 2 == 0, 0.3, 0.9)
    agree, clusters = _study(rng, 20, 10, rates)
    plan = label_plan(agree, clusters, target_half_width=0.01, cents_per_judgment=20)
    assert plan.floor_half_width > 0.01
    assert plan.labels_needed is None and plan.additional is None and plan.cost_cents is None
    # On more prompts (a pilot of 20 of the study's 2,000 prompts) the floor falls below it.
    wider = label_plan(agree, clusters, prompts=2000, target_half_width=0.03, cents_per_judgment=20)
    assert wider.labels_needed is not None and wider.additional is not None
    assert wider.cost_cents == wider.additional * 20


def test_the_plan_prices_the_additional_labels_at_the_studys_pay() -> None:
    rng = np.random.default_rng(5)
    rates = rng.uniform(0.55, 0.75, 100)
    agree, clusters = _study(rng, 100, 4, rates)
    plan = label_plan(agree, clusters, target_half_width=0.04, cents_per_judgment=25)
    assert plan.labels_needed is not None and plan.labels_needed > 400
    assert plan.additional == plan.labels_needed - 400
    assert plan.cost_cents == plan.additional * 25
    widths = [p.half_width for p in plan.points]
    assert widths == sorted(widths, reverse=True)  # more labels, narrower
    assert plan.points[0].half_width == pytest.approx(plan.current_half_width)
    assert plan.labels_needed in [p.labels for p in plan.points]


def test_rank_stability_grows_with_the_labels_behind_the_leaderboard() -> None:
    rng = np.random.default_rng(9)
    strength = {"a": 1.2, "b": 0.9, "c": 0.6, "d": 0.3}
    rows = []
    names = list(strength)
    for _ in range(300):
        x, y = rng.choice(names, size=2, replace=False)
        p = 1 / (1 + math.exp(strength[y] - strength[x]))
        rows.append(
            {"model_a": x, "model_b": y, "winner": "model_a" if rng.random() < p else "model_b"}
        )
    battles = pd.DataFrame(rows)
    small, large = rank_stability(battles, sizes=[20, 1200], rounds=40, seed=1)
    assert small < large
    assert large > 0.9
    assert all(math.isnan(t) for t in rank_stability(battles.iloc[:0], sizes=[10]))


def test_the_cell_fit_of_rank_stability_is_the_leaderboards_bradley_terry_fit() -> None:
    battles = pd.DataFrame(
        {
            "model_a": ["a", "a", "b", "c", "a", "b"],
            "model_b": ["b", "c", "c", "a", "b", "c"],
            "winner": ["model_a", "model_a", "tie", "model_b", "model_b", "model_a"],
        }
    )
    board = bradley_terry(battles).set_index("model")["rating"]
    cells = [(0, 1, 1.0, 1.0), (0, 2, 1.0, 1.0), (1, 2, 0.5, 1.0), (2, 0, 0.0, 1.0)]
    cells += [(0, 1, 0.0, 1.0), (1, 2, 1.0, 1.0)]
    ca, cb, score, weight = (np.array(col) for col in zip(*cells, strict=True))
    strengths = win_matrix_strengths(ca.astype(np.intp), cb.astype(np.intp), score, weight, 3)
    np.testing.assert_allclose(
        strengths * 400 / math.log(10) + 1000, board.loc[["a", "b", "c"]].to_numpy(), atol=1e-6
    )
