"""AdvisorQA's Table 3 measures against worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.stats.listwise import listwise_scores, random_scores, wins_scores


def test_a_perfect_ranker_scores_one_everywhere() -> None:
    result = listwise_scores([[3.0, 2.0, 1.0], [9.0, 8.0, 7.0, 6.0, 5.0]])
    assert result.ndcg == {2: 1.0, 3: 1.0, 5: 1.0}
    assert result.ndcg_lists == {2: 2, 3: 2, 5: 1}
    assert (result.first_vs_second, result.first_vs_last, result.lists) == (1.0, 1.0, 2)


def test_ndcg_of_a_swapped_pair_equals_the_worked_example() -> None:
    # Gold relevances 3, 2, 1; the ranker puts the 2nd first: DCG@2 = 2 + 3/log2(3),
    # IDCG@2 = 3 + 2/log2(3).
    result = listwise_scores([[1.0, 2.0, 0.0]])
    expected = (2 + 3 / math.log2(3)) / (3 + 2 / math.log2(3))
    assert result.ndcg[2] == pytest.approx(expected)
    assert result.first_vs_second == 0.0
    assert result.first_vs_last == 1.0
    assert math.isnan(result.ndcg[5])


def test_a_tie_counts_half() -> None:
    result = listwise_scores([[1.0, 1.0, 1.0]])
    assert result.first_vs_second == 0.5
    assert result.first_vs_last == 0.5


def test_wins_rank_a_list_from_pairwise_verdicts() -> None:
    # 0 beats 1, 0 beats 2, 1 and 2 tie.
    scores = wins_scores(3, [(0, 1, 0.0), (0, 2, 0.0), (1, 2, 0.5)])
    np.testing.assert_array_equal(scores, [2.0, 0.5, 0.5])


def test_the_random_ranker_is_seeded_and_near_a_half() -> None:
    lists = random_scores([5] * 2000, seed=7)
    again = random_scores([5] * 2000, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(lists, again, strict=True))
    result = listwise_scores(lists)
    assert result.first_vs_second == pytest.approx(0.5, abs=0.04)
