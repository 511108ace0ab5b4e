"""Shares of a per-answer rating's levels with intervals over prompts, and how the preferred
answer's ratings compare with the other's, on hand-made examples."""

from __future__ import annotations

import math

import pytest

from leaderboard.stats.answer_ratings import level_shares, preferred_rated_higher

ACCEPTABILITY = ("accept", "reject", "unsure")


def test_level_shares_count_each_level_and_leave_out_what_was_not_rated() -> None:
    shares = level_shares(
        ["accept", "reject", "accept", None, "unsure", float("nan")],
        ["p1", "p1", "p2", "p2", "p3", "p3"],
        ACCEPTABILITY,
        resampled="prompt",
        rounds=200,
        seed=1,
    )
    assert shares.total == 4 and shares.clusters == 3 and shares.rounds == 200
    got = {s.level: (s.count, s.total, s.share) for s in shares.levels}
    assert got == {"accept": (2, 4, 0.5), "reject": (1, 4, 0.25), "unsure": (1, 4, 0.25)}
    assert [s.level for s in shares.levels] == list(ACCEPTABILITY)


def test_prompts_alike_give_an_interval_of_one_point() -> None:
    # Every prompt has one accepted and one rejected answer: any draw of prompts gives 1/2.
    values = ["accept", "reject"] * 6
    prompts = [p for p in range(6) for _ in range(2)]
    shares = level_shares(values, prompts, ACCEPTABILITY, resampled="prompt", rounds=300, seed=0)
    accept = shares.level("accept")
    assert (accept.share, accept.lower, accept.upper) == (0.5, 0.5, 0.5)
    unsure = shares.level("unsure")
    assert (unsure.share, unsure.lower, unsure.upper) == (0.0, 0.0, 0.0)


def test_an_interval_over_prompts_is_wider_than_over_ratings_when_prompts_differ() -> None:
    # Ten prompts of ten ratings; a prompt's answers are all accepted or all rejected.
    values = [("accept" if p % 2 else "reject") for p in range(10) for _ in range(10)]
    prompts = [p for p in range(10) for _ in range(10)]
    by_prompt = level_shares(
        values, prompts, ACCEPTABILITY, resampled="prompt", rounds=2000, seed=3
    ).level("accept")
    by_rating = level_shares(
        values, None, ACCEPTABILITY, resampled="rating", rounds=2000, seed=3
    ).level("accept")
    assert by_prompt.share == by_rating.share == 0.5
    # Over prompts the share is a mean of 10 draws of 0 or 1 (sd 0.16); over ratings of 100.
    assert by_prompt.upper - by_prompt.lower > 2.5 * (by_rating.upper - by_rating.lower)
    assert by_prompt.lower <= 0.3 and by_prompt.upper >= 0.7
    assert 0.38 <= by_rating.lower <= 0.42 and 0.58 <= by_rating.upper <= 0.62


def test_one_prompt_leaves_nothing_to_resample() -> None:
    shares = level_shares(
        ["accept", "reject"], ["p", "p"], ACCEPTABILITY, resampled="prompt", rounds=50, seed=0
    )
    assert shares.rounds == 0
    accept = shares.level("accept")
    assert accept.share == 0.5 and math.isnan(accept.lower) and math.isnan(accept.upper)


def test_no_ratings_give_no_share() -> None:
    shares = level_shares([], [], ACCEPTABILITY, resampled="prompt", rounds=10, seed=0)
    assert shares.total == 0 and all(math.isnan(s.share) for s in shares.levels)


def test_a_level_outside_the_scale_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="maybe"):
        level_shares(["accept", "maybe"], None, ACCEPTABILITY, resampled="x", rounds=10, seed=0)


def test_the_preferred_answer_counts_only_when_the_two_are_rated_apart() -> None:
    preference = ["A", "B", "A", "tie", "B", "A"]
    score_a = [2, 2, 1, 0, 1, math.nan]
    score_b = [0, 1, 1, 2, 2, 0]
    assert preferred_rated_higher(preference, score_a, score_b).tolist() == [
        "higher",  # A preferred, A rated yes against no
        "lower",  # B preferred, but rated below A
        None,  # rated alike
        None,  # a tie prefers neither
        "higher",
        None,  # A not rated
    ]
