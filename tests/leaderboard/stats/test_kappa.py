import math

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss

from leaderboard.stats.agreement import (
    cohen_kappa,
    fleiss_kappa,
    fleiss_kappa_generalized,
    fleiss_kappa_generalized_interval,
)

# Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
FLEISS_EXAMPLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_matches_the_wikipedia_worked_example() -> None:
    assert round(fleiss_kappa(FLEISS_EXAMPLE), 3) == 0.210


def test_fleiss_kappa_is_one_when_every_subject_is_unanimous() -> None:
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "counts",
    [
        pytest.param([[5], [5], [5]], id="one category"),
        pytest.param([[4, 0], [4, 0]], id="every rating in one category"),
        pytest.param([[1, 0], [0, 1]], id="one rating per subject"),
        pytest.param(np.zeros((0, 3)), id="no subjects"),
    ],
)
def test_fleiss_kappa_is_nan_when_undefined(counts: list[list[int]]) -> None:
    assert math.isnan(fleiss_kappa(counts))


def test_fleiss_kappa_rejects_subjects_with_unequal_numbers_of_ratings() -> None:
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 1], [1, 1]])


def test_cohen_kappa_matches_the_wikipedia_50_item_example() -> None:
    # 20 both yes, 5 A yes / B no, 10 A no / B yes, 15 both no: p_o 0.7, p_e 0.5, kappa 0.4.
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10
    pairs += [("no", "no")] * 15
    a, b = zip(*pairs, strict=True)

    assert cohen_kappa(list(a), list(b)) == pytest.approx(0.4)


def weighted_kappa_by_hand(a: list[int], b: list[int], cats: list[int], power: int) -> float:
    k, n = len(cats), len(a)
    observed = expected = 0.0
    for i, ci in enumerate(cats):
        for j, cj in enumerate(cats):
            weight = (abs(i - j) / (k - 1)) ** power
            o_ij = sum(1 for x, y in zip(a, b, strict=True) if x == ci and y == cj) / n
            e_ij = (a.count(ci) / n) * (b.count(cj) / n)
            observed += weight * o_ij
            expected += weight * e_ij
    return 1.0 - observed / expected


@pytest.mark.parametrize(("weights", "power"), [("linear", 1), ("quadratic", 2)])
def test_weighted_cohen_kappa_equals_an_explicit_double_loop(weights: str, power: int) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(1, 6, 200)
    b = np.clip(a + rng.integers(-2, 3, 200), 1, 5)

    kappa = cohen_kappa(a, b, weights)  # type: ignore[arg-type]

    expected = weighted_kappa_by_hand(a.tolist(), b.tolist(), [1, 2, 3, 4, 5], power)
    assert kappa == pytest.approx(expected, abs=1e-12)


def test_weighted_cohen_kappa_uses_the_given_category_order() -> None:
    a = ["low", "mid", "high", "mid", "low", "high"]
    b = ["low", "high", "high", "mid", "mid", "mid"]
    order = ["low", "mid", "high"]
    as_numbers = {"low": 1, "mid": 2, "high": 3}

    kappa = cohen_kappa(a, b, "linear", categories=order)

    expected = weighted_kappa_by_hand(
        [as_numbers[x] for x in a], [as_numbers[x] for x in b], [1, 2, 3], 1
    )
    assert kappa == pytest.approx(expected)


def test_unweighted_cohen_kappa_for_two_raters_equals_the_textbook_formula() -> None:
    rng = np.random.default_rng(11)
    a = rng.integers(0, 3, 300)
    b = np.where(rng.random(300) < 0.6, a, rng.integers(0, 3, 300))
    p_o = float((a == b).mean())
    p_e = sum(float((a == c).mean() * (b == c).mean()) for c in range(3))

    assert cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))


@pytest.mark.parametrize(
    ("a", "b"),
    [pytest.param([], [], id="no items"), pytest.param(["x", "x"], ["x", "x"], id="one label")],
)
def test_cohen_kappa_is_nan_when_chance_agreement_is_certain(a: list[str], b: list[str]) -> None:
    assert math.isnan(cohen_kappa(a, b))


def test_cohen_kappa_rejects_a_label_outside_the_given_categories() -> None:
    with pytest.raises(ValueError, match="categories"):
        cohen_kappa(["a", "z"], ["a", "a"], categories=["a", "b"])


def test_generalised_fleiss_kappa_of_varying_rater_counts_by_hand() -> None:
    # Unit 1: 3 votes A A B; unit 2: 2 votes B B; unit 3: 4 votes A A A tie; unit 4: 1 vote.
    table = [[2, 1, 0], [0, 2, 0], [3, 0, 1], [1, 0, 0]]
    # P_i = sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)): 2/6, 2/2, 6/12; unit 4 has no vote pair.
    p_a = (2 / 6 + 1 + 6 / 12) / 3
    # pi_k = mean over the three units of r_ik / r_i.
    pi = [(2 / 3 + 0 + 3 / 4) / 3, (1 / 3 + 1 + 0) / 3, (0 + 0 + 1 / 4) / 3]
    p_e = sum(p * p for p in pi)
    assert fleiss_kappa_generalized(table) == pytest.approx((p_a - p_e) / (1 - p_e))


def test_generalised_fleiss_kappa_is_fleiss_kappa_when_every_unit_has_the_same_count() -> None:
    rng = np.random.default_rng(5)
    table = rng.multinomial(4, [0.5, 0.3, 0.2], size=30)
    assert fleiss_kappa_generalized(table) == pytest.approx(fleiss_kappa(table), abs=1e-12)
    assert fleiss_kappa_generalized(table) == pytest.approx(
        statsmodels_fleiss(table, method="fleiss"), abs=1e-12
    )


def test_the_generalised_interval_resamples_prompts_and_holds_the_estimate() -> None:
    rng = np.random.default_rng(6)
    table = np.vstack([rng.multinomial(n, [0.6, 0.3, 0.1]) for n in rng.integers(1, 6, 60)])
    prompts = np.arange(60) // 3
    result = fleiss_kappa_generalized_interval(table, prompts, rounds=300, seed=1)
    assert result.estimate == fleiss_kappa_generalized(table)
    assert result.lower < result.estimate < result.upper
    assert result.clusters == len(set(prompts[table.sum(axis=1) >= 2].tolist()))
