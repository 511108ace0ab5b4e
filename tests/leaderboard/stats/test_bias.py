import math

import pytest

from leaderboard.stats.bias import flip_rate, length_bias, position_bias
from leaderboard.stats.proportion import wilson_interval


def test_wilson_interval_matches_the_textbook_value_for_8_of_10() -> None:
    result = wilson_interval(8, 10)

    assert result.share == 0.8
    assert (round(result.lower or 0, 4), round(result.upper or 0, 4)) == (0.4902, 0.9433)


def test_wilson_interval_of_nothing_is_empty() -> None:
    assert wilson_interval(0, 0).share is None


def test_position_bias_histograms_shown_scores_and_counts_first_shown_preferences() -> None:
    shown = [1, 1, 2, 3, 4, 4, 5, 6, 8, 8]

    without_ties = position_bias(shown)
    with_ties = position_bias(shown, ties=True)

    assert without_ties.histogram == {1: 2, 2: 1, 3: 1, 4: 2, 5: 1, 6: 1, 7: 0, 8: 2}
    assert (without_ties.prefers_first.count, without_ties.prefers_first.total) == (6, 10)
    # With ties 4 and 5 are left out: 4 of the 7 decisive judgments prefer the first shown.
    assert (with_ties.prefers_first.count, with_ties.prefers_first.total) == (4, 7)


def test_a_judge_always_picking_the_left_answer_shows_full_position_bias() -> None:
    result = position_bias([1, 2, 2, 3] * 25)

    assert result.prefers_first.share == 1.0
    assert result.prefers_first.lower is not None and result.prefers_first.lower > 0.95


def test_flip_rate_counts_pairs_whose_canonical_preference_changes_with_the_order() -> None:
    first = ["A", "A", "B", "tie", "B"]
    second = ["A", "B", "B", "A", "B"]

    result = flip_rate(first, second)

    assert (result.count, result.total, result.share) == (2, 5, 0.4)


def test_flip_rate_rejects_orders_of_different_length() -> None:
    with pytest.raises(ValueError, match="equal length"):
        flip_rate(["A"], ["A", "B"])


def test_length_bias_counts_decisive_judgments_preferring_the_longer_answer() -> None:
    length_a = [100, 100, 300, 200, 50, 80]
    length_b = [200, 200, 100, 200, 60, 40]
    preference = ["B", "A", "A", "B", "tie", "A"]

    result = length_bias(length_a, length_b, preference)

    # Equal lengths (row 4) and the tie (row 5) are left out: B longer & chosen, A shorter &
    # chosen, A longer & chosen, A longer & chosen -> 3 of 4 prefer the longer answer.
    assert (result.prefers_longer.count, result.prefers_longer.total) == (3, 4)
    assert result.correlation.n == 6
    assert result.correlation.estimate > 0


def test_length_bias_without_decisive_judgments_has_no_share() -> None:
    result = length_bias([1, 2], [2, 1], ["tie", "tie"])

    assert result.prefers_longer.share is None
    assert math.isnan(result.correlation.estimate)
