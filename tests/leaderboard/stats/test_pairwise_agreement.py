import math
from itertools import combinations, product

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.agreement import (
    AgreementCount,
    bootstrap_agreement_ci,
    pairwise_agreement,
    pairwise_agreement_by_unit,
)


def votes(*rows: tuple[str, str, str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["key", "label", "rater"])


def test_judge_vs_humans_compares_the_judge_vote_with_each_human_vote() -> None:
    judge = votes(("q1", "A", "gpt4"), ("q2", "tie", "gpt4"))
    humans = votes(("q1", "A", "h1"), ("q1", "B", "h2"), ("q1", "tie", "h3"), ("q2", "tie", "h1"))

    result = pairwise_agreement(judge, humans)

    # q1: A vs A, B, tie -> 1 of 3; q2: tie vs tie -> 1 of 1. S2 keeps only A vs A and A vs B.
    assert result.s1 == AgreementCount(2, 4, 0.5)
    assert result.s2 == AgreementCount(1, 2, 0.5)


def test_humans_vs_humans_compares_every_unordered_pair_of_different_raters() -> None:
    humans = votes(("q1", "A", "h1"), ("q1", "A", "h2"), ("q1", "B", "h3"), ("q1", "tie", "h4"))

    result = pairwise_agreement(humans)

    assert result.s1 == AgreementCount(1, 6, 1 / 6)
    assert result.s2 == AgreementCount(1, 3, 1 / 3)


def test_two_votes_of_the_same_rater_are_never_compared_with_each_other() -> None:
    humans = votes(("q1", "A", "h1"), ("q1", "A", "h1"), ("q1", "B", "h2"))

    result = pairwise_agreement(humans)

    assert result.s1 == AgreementCount(0, 2, 0.0)


def test_keys_voted_on_by_only_one_source_are_not_compared() -> None:
    judge = votes(("q1", "A", "gpt4"))
    humans = votes(("q2", "A", "h1"))

    result = pairwise_agreement(judge, humans)

    assert result.s1 == AgreementCount(0, 0, None)
    assert result.s2 == AgreementCount(0, 0, None)


def test_majority_level_treats_a_tied_majority_as_tie() -> None:
    judge = votes(("q1", "tie", "gpt4"), ("q2", "A", "gpt4"), ("q3", "B", "gpt4"))
    humans = votes(
        ("q1", "A", "h1"), ("q1", "B", "h2"),  # tied majority -> tie, agrees with the judge
        ("q2", "A", "h1"), ("q2", "A", "h2"), ("q2", "B", "h3"),  # A
        ("q3", "A", "h1"), ("q3", "tie", "h2"),  # tied majority -> tie
    )  # fmt: skip

    result = pairwise_agreement(judge, humans, level="majority")

    assert result.s1 == AgreementCount(2, 3, 2 / 3)
    assert result.s2 == AgreementCount(1, 1, 1.0)
    assert result.level == "majority"


def naive_agreement(
    x: pd.DataFrame, y: pd.DataFrame | None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The definition written out with explicit loops over vote pairs."""
    s1 = [0, 0]
    s2 = [0, 0]
    for key in set(x["key"]):
        xs = list(x.loc[x["key"] == key, ["label", "rater"]].itertuples(index=False))
        if y is None:
            pairs = [(u, v) for u, v in combinations(xs, 2) if u.rater != v.rater]
        else:
            ys = list(y.loc[y["key"] == key, ["label", "rater"]].itertuples(index=False))
            pairs = list(product(xs, ys))
        for u, v in pairs:
            s1[0] += u.label == v.label
            s1[1] += 1
            if "tie" not in (u.label, v.label):
                s2[0] += u.label == v.label
                s2[1] += 1
    return (s1[0], s1[1]), (s2[0], s2[1])


def random_votes(rng: np.random.Generator, n: int, raters: int, keys: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": rng.integers(0, keys, n),
            "label": rng.choice(["A", "B", "tie"], n, p=[0.4, 0.35, 0.25]),
            "rater": rng.integers(0, raters, n).astype(str),
        }
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vote_level_counts_equal_the_definition_written_as_loops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = random_votes(rng, 300, raters=12, keys=40)
    y = random_votes(rng, 60, raters=1, keys=40)

    within = pairwise_agreement(x)
    across = pairwise_agreement(y, x)

    (w1, w2), (a1, a2) = naive_agreement(x, None), naive_agreement(y, x)
    assert (within.s1.agree, within.s1.total) == w1
    assert (within.s2.agree, within.s2.total) == w2
    assert (across.s1.agree, across.s1.total) == a1
    assert (across.s2.agree, across.s2.total) == a2


def test_per_unit_counts_sum_to_the_pooled_counts() -> None:
    rng = np.random.default_rng(5)
    x = random_votes(rng, 200, raters=8, keys=30)

    per_unit = pairwise_agreement_by_unit(x)
    pooled = pairwise_agreement(x)

    assert per_unit["agree_s1"].sum() == pooled.s1.agree
    assert per_unit["total_s2"].sum() == pooled.s2.total
    assert (per_unit["total_s1"] > 0).all()


def test_custom_column_names_are_honoured() -> None:
    frame = pd.DataFrame({"pair": [1, 1], "verdict": ["A", "A"], "worker": ["w1", "w2"]})

    result = pairwise_agreement(frame, key="pair", label="verdict", rater="worker")

    assert result.s1 == AgreementCount(1, 1, 1.0)


def test_labels_outside_a_b_tie_are_rejected() -> None:
    with pytest.raises(ValueError, match="labels"):
        pairwise_agreement(votes(("q1", "model_a", "h1"), ("q1", "A", "h2")))


def test_majority_level_needs_two_sources() -> None:
    with pytest.raises(ValueError, match="other"):
        pairwise_agreement(votes(("q1", "A", "h1")), level="majority")


def test_bootstrap_agreement_interval_is_reproducible_and_brackets_the_rate() -> None:
    rng = np.random.default_rng(9)
    total = rng.integers(1, 6, 400)
    agree = rng.binomial(total, 0.7)

    first = bootstrap_agreement_ci(agree, total, rounds=500, seed=4)
    again = bootstrap_agreement_ci(agree, total, rounds=500, seed=4)
    other = bootstrap_agreement_ci(agree, total, rounds=500, seed=5)

    assert first == again
    assert other != first
    assert first.rate == pytest.approx(agree.sum() / total.sum())
    assert first.lower < first.rate < first.upper
    # Binomial standard error of the pooled rate, about 0.01 here: the interval is of that size.
    assert 0.02 < first.upper - first.lower < 0.06


def test_bootstrap_agreement_interval_without_comparisons_is_nan() -> None:
    result = bootstrap_agreement_ci([], [], rounds=10)

    assert math.isnan(result.rate) and math.isnan(result.lower) and math.isnan(result.upper)
