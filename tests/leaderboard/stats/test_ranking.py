import math

import pandas as pd
import pytest

from leaderboard.stats.ranking import rank_correlation
from leaderboard.stats.rationale import SEVEN_VALUES, rationale_distribution
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
