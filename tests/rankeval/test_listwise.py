"""AdvisorQA's Table 3 measures against worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankeval.listwise import advisorqa_table, listwise_scores, random_scores, wins_scores


def test_a_perfect_ranker_scores_one_everywhere() -> None:
    result = listwise_scores([[3.0, 2.0, 1.0], [9.0, 8.0, 7.0, 6.0, 5.0]])
    assert result.ndcg == {2: 1.0, 3: 1.0, 5: 1.0}
    assert result.ndcg_lists == {2: 2, 3: 2, 5: 2}
    assert (result.first_vs_second, result.first_vs_last, result.lists) == (1.0, 1.0, 2)


def test_ndcg_of_a_swapped_pair_equals_the_worked_example() -> None:
    # Gold relevances 3, 2, 1; the ranker puts the 2nd first: DCG@2 = 2 + 3/log2(3),
    # IDCG@2 = 3 + 2/log2(3).
    result = listwise_scores([[1.0, 2.0, 0.0]])
    expected = (2 + 3 / math.log2(3)) / (3 + 2 / math.log2(3))
    assert result.ndcg[2] == pytest.approx(expected)
    assert result.first_vs_second == 0.0
    assert result.first_vs_last == 1.0
    # k cut to the list's 3 answers: NDCG@5 is the list's NDCG@3.
    assert result.ndcg[5] == pytest.approx(result.ndcg[3])


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


def test_the_table_ranks_scorers_by_score_and_judges_by_wins_with_direct_accuracies() -> None:
    lists = [[1, 2, 3], [4, 5, 6]]
    rows = advisorqa_table(
        lists,
        scores={"pl": {1: 3.0, 2: 2.0, 3: 1.0, 4: 1.0, 5: 2.0, 6: 0.0}},
        # The judge prefers 1 over 2 and 1 over 3, ties 2 and 3; it judged nothing on list 2.
        verdicts={"llm": [(1, 2, 0.0), (3, 1, 1.0), (2, 3, 0.5)]},
        lengths={1: 10, 2: 30, 3: 20, 4: 5, 5: 4, 6: 3},
        seed=0,
    )
    by_source = {row.source: row for row in rows}
    assert [row.ranking for row in rows] == ["random", "length", "scores", "wins"]
    pl = by_source["pl"]
    assert (pl.lists, pl.first_vs_second, pl.first_vs_last) == (2, 0.5, 1.0)
    longer = by_source["longer answer"]
    assert (longer.first_vs_second, longer.first_vs_last) == (0.5, 0.5)
    llm = by_source["llm"]
    assert (llm.lists, llm.first_vs_second, llm.first_vs_last) == (1, 1.0, 1.0)
    assert (llm.second_pairs, llm.last_pairs) == (1, 1)
    # Wins 2, 0.5, 0.5: the best first; the tied two share the mean discount of places 2 and 3.
    shared = (1 / math.log2(3) + 1 / math.log2(4)) / 2
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert llm.ndcg_3 == pytest.approx((3 + 3 * shared) / ideal)


def test_ndcg_at_k_cuts_k_to_a_short_lists_length_as_scikit_learn_does() -> None:
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(3)
    lists = [rng.normal(size=n) for n in (2, 3, 4, 4, 6)]
    result = listwise_scores(lists)
    for k in (2, 3, 5):
        expected = np.mean([ndcg_score([np.arange(row.size, 0, -1)], [row], k=k) for row in lists])
        assert result.ndcg[k] == pytest.approx(expected)
    # Every list counts in every column, and NDCG@5 of the 4-answer lists is their NDCG@4.
    assert result.ndcg_lists == {2: 5, 3: 5, 5: 5}
    assert result.ndcg_cut == {2: 0, 3: 1, 5: 4}
    assert listwise_scores(lists[2:4], ks=(5,)).ndcg[5] == pytest.approx(
        listwise_scores(lists[2:4], ks=(4,)).ndcg[4]
    )


def test_the_skip_rule_leaves_short_lists_out_when_asked() -> None:
    result = listwise_scores([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0]], short_lists="skip")
    assert result.ndcg_lists == {2: 2, 3: 2, 5: 1}
    assert result.ndcg_cut == {2: 0, 3: 0, 5: 0}
    with pytest.raises(ValueError, match="short_lists"):
        listwise_scores([[1.0, 2.0]], short_lists="drop")  # type: ignore[arg-type]


def test_ndcg_with_tied_scores_matches_scikit_learns_tie_averaging() -> None:
    from sklearn.metrics import ndcg_score

    from rankeval.ndcg import ndcg_at_k

    scores = np.array([2.0, 1.0, 1.0, 1.0, 0.0])
    gains = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    for k in (1, 2, 3, 7):
        assert ndcg_at_k(scores, gains, k) == pytest.approx(ndcg_score([gains], [scores], k=k))
