import math
from typing import Literal

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from core.conventions import SEVEN_VALUE_KEYS as SEVEN_VALUES
from leaderboard.stats.correlation import exact_permutation_p
from leaderboard.stats.ranking import rank_correlation
from leaderboard.stats.rationale import rationale_distribution
from rankeval.ndcg import ndcg_at_k


def test_ndcg_matches_the_wikipedia_worked_example() -> None:
    # Wikipedia "Discounted cumulative gain": relevances 3, 2, 3, 0, 1, 2 in ranked order give
    # DCG6 = 6.861, IDCG6 = 7.141, nDCG6 = 0.961.
    scores = [6, 5, 4, 3, 2, 1]
    relevances = [3, 2, 3, 0, 1, 2]

    assert round(ndcg_at_k(scores, relevances, 6), 3) == 0.961


def test_ndcg_is_one_for_the_ideal_ranking_and_lower_for_the_reverse() -> None:
    relevances = [5, 3, 2, 0]

    assert ndcg_at_k([4, 3, 2, 1], relevances, 2) == pytest.approx(1.0)
    assert ndcg_at_k([1, 2, 3, 4], relevances, 2) < 0.5


def test_exponential_gain_rewards_the_top_item_more() -> None:
    scores, relevances = [3, 2, 1], [1, 3, 0]

    linear = ndcg_at_k(scores, relevances, 3)
    exponential = ndcg_at_k(scores, relevances, 3, gain="exponential")

    assert exponential == pytest.approx((1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3)))
    assert exponential < linear


def test_ndcg_is_nan_without_any_relevant_item() -> None:
    assert math.isnan(ndcg_at_k([1, 2], [0, 0], 2))
    assert math.isnan(ndcg_at_k([], [], 5))


def test_rank_correlation_compares_only_the_models_both_leaderboards_rate() -> None:
    humans = {"a": 1200.0, "b": 1100.0, "c": 1000.0, "d": 900.0, "e": 850.0, "only-h": 1.0}
    judge = pd.Series({"a": 1150.0, "b": 1160.0, "c": 990.0, "d": 950.0, "e": 700.0, "j": 5.0})

    result = rank_correlation(humans, judge)

    assert result.models == ("a", "b", "c", "d", "e")
    assert result.spearman.estimate == pytest.approx(0.9)
    assert result.kendall.estimate == pytest.approx(0.8)


def test_rationale_distribution_counts_each_value_once_per_judgment() -> None:
    selections = [["relevance", "ethics"], ["relevance", "relevance"], [], ["creativity"]]

    result = rationale_distribution(selections).set_index("value")

    assert list(result.index) == list(SEVEN_VALUES)
    assert result.loc["relevance", "count"] == 2
    assert result.loc["relevance", "share"] == pytest.approx(0.5)
    assert result.loc["relevance", "share_of_mentions"] == pytest.approx(0.5)
    assert result.loc["empathy", "count"] == 0


def test_rationale_distribution_rejects_an_unknown_value() -> None:
    with pytest.raises(ValueError, match="unknown"):
        rationale_distribution([["helpfulness"]])


def test_few_systems_get_no_interval_and_an_exact_permutation_p_value() -> None:
    # Six systems ranked alike: Fisher's z would read [1, 1].
    humans = {m: float(6 - i) for i, m in enumerate("abcdef")}
    result = rank_correlation(humans, dict(humans))
    for corr in (result.spearman, result.kendall):
        assert corr.estimate == 1.0 and corr.n == 6
        assert math.isnan(corr.lower) and math.isnan(corr.upper)
        assert corr.interval == "too few systems for an interval"
        assert corr.p_method == "exact permutation"
        # Only the order itself and its reverse reach |correlation| 1: 2 of 6! orders.
        assert corr.p_value == pytest.approx(2 / 720)


def test_the_exact_p_value_of_one_swapped_pair_of_four_by_hand() -> None:
    # y swaps the last two: rho = 1 - 6 * 2 / (4 * 15) = 0.8, tau = (5 - 1) / 6. Orders of 4 with
    # rho >= 0.8 are the identity and the 3 adjacent swaps, and as many at <= -0.8: 8 of 24;
    # tau >= 2/3 takes the orders with at most one inversion, the same 4 (and 4 reversed).
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 4.0, 3.0]
    assert exact_permutation_p(x, y, "spearman") == pytest.approx(8 / 24)
    assert exact_permutation_p(x, y, "kendall") == pytest.approx(8 / 24)


@pytest.mark.parametrize("method", ["spearman", "kendall"])
def test_the_exact_p_value_equals_scipys_exhaustive_permutation_test_with_ties(
    method: Literal["spearman", "kendall"],
) -> None:
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    y = np.array([2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0])
    # Two-sided as P(|T| >= |t|) over all 7! pairings: scipy's test of |T|, one-sided.
    statistic = {
        "spearman": lambda a: abs(stats.spearmanr(a, y).statistic),
        "kendall": lambda a: abs(stats.kendalltau(a, y).statistic),
    }[method]
    expected = stats.permutation_test(
        (x,), statistic, permutation_type="pairings", n_resamples=np.inf, alternative="greater"
    ).pvalue
    assert exact_permutation_p(x, y, method) == pytest.approx(expected)


def test_ten_systems_or_more_keep_the_fisher_z_interval() -> None:
    rng = np.random.default_rng(4)
    a = {f"m{i}": float(v) for i, v in enumerate(rng.normal(size=12))}
    b = {m: v + float(rng.normal(scale=0.5)) for m, v in a.items()}
    result = rank_correlation(a, b)
    assert result.spearman.interval == "fisher-z" and result.spearman.p_method == "asymptotic"
    assert result.spearman.lower < result.spearman.estimate < result.spearman.upper
