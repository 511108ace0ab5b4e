import math

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.mtbench import calls_sort, judge_votes_combine

COLUMNS = ["run_id", "pair_id", "order", "label", "likert"]


def calls(rows: list[tuple[int, int, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def test_two_orders_that_agree_give_their_verdict_and_two_that_differ_give_a_tie() -> None:
    combined = judge_votes_combine(
        calls(
            [
                (1, 10, "ab", "A", 2.0),
                (1, 10, "ba", "A", 3.0),
                (1, 11, "ab", "A", 2.0),
                (1, 11, "ba", "B", 7.0),
                (1, 12, "ba", "B", 8.0),
                (1, 13, "both", "tie", 4.0),
            ]
        )
    )

    assert combined["pair_id"].tolist() == [10, 11, 12, 13]
    # 12 was judged in one order only, 13 on both answers at once: their one verdict.
    assert list(combined["label"]) == ["A", "tie", "B", "tie"]
    # The canonical Likert vote is the mean of the orders' scores.
    assert combined["likert"].tolist() == [2.5, 4.5, 8.0, 4.0]


def test_a_missing_score_is_left_out_of_the_mean_and_no_score_is_nan() -> None:
    combined = judge_votes_combine(
        calls([(1, 10, "ab", "B", 6.0), (1, 10, "ba", "B", np.nan), (2, 10, "ab", "A", np.nan)])
    )

    assert combined["run_id"].tolist() == [1, 2]
    assert combined["likert"].iloc[0] == 6.0 and math.isnan(combined["likert"].iloc[1])


def test_each_run_is_combined_apart_whatever_the_order_of_the_rows() -> None:
    rows = [
        (2, 10, "ba", "B", 7.0),
        (1, 10, "ba", "B", 7.0),
        (2, 10, "ab", "B", 6.0),
        (1, 10, "ab", "A", 1.0),
    ]

    combined = judge_votes_combine(calls(rows))

    assert combined[["run_id", "pair_id"]].to_numpy().tolist() == [[1, 10], [2, 10]]
    assert list(combined["label"]) == ["tie", "B"]
    assert combined["likert"].tolist() == pytest.approx([4.0, 6.5])


def test_calls_sort_orders_by_run_pair_and_order_and_keeps_sorted_calls_as_they_are() -> None:
    shuffled = calls([(2, 1, "ab", "A", 1.0), (1, 2, "ba", "B", 8.0), (1, 2, "ab", "A", 1.0)])
    ordered = calls_sort(shuffled)

    assert ordered[["run_id", "pair_id", "order"]].to_numpy().tolist() == [
        [1, 2, "ab"],
        [1, 2, "ba"],
        [2, 1, "ab"],
    ]
    pd.testing.assert_frame_equal(calls_sort(ordered), ordered)


def test_no_calls_give_no_votes() -> None:
    assert judge_votes_combine(calls([])).empty
