"""A mean single-answer grade and its interval over prompts, on hand-made grades."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.stats.grades import mean_grade


def test_the_mean_is_over_grades_and_the_interval_over_prompts():
    # Prompt 1: grades 8 and 6 (sum 14 of 2); prompt 2: grade 4 (sum 4 of 1). A round draws
    # two prompts: {1, 1} -> 28 / 4 = 7, {1, 2} -> 18 / 3 = 6, {2, 2} -> 8 / 2 = 4, with
    # probabilities 1/4, 1/2, 1/4; so the 95% percentile interval is [4, 7] exactly.
    result = mean_grade([8, 6, 4], [1, 1, 2], rounds=2000, seed=0)
    assert result.mean == pytest.approx(6.0)
    assert (result.lower, result.upper) == (4.0, 7.0)
    assert (result.grades, result.prompts, result.resampled, result.rounds) == (
        3,
        2,
        "prompt",
        2000,
    )


def test_by_grade_each_grade_is_its_own_cluster():
    result = mean_grade([8, 6, 4], [1, 1, 2], rounds=2000, seed=0, by_prompt=False)
    # Three grades drawn three times: the extremes 4 and 8 (all one grade) each have 1/27 > 2.5%.
    assert (result.lower, result.upper) == (4.0, 8.0)
    assert result.resampled == "grade"


def test_one_prompt_has_no_interval_and_no_grade_no_mean():
    one = mean_grade([7, 9], [5, 5], rounds=100, seed=0)
    assert (one.mean, one.lower, one.upper, one.rounds) == (8.0, None, None, 0)
    none = mean_grade([], [], rounds=100, seed=0)
    assert (none.mean, none.grades, none.prompts) == (None, 0, 0)


def test_the_same_seed_gives_the_same_interval_and_a_missing_grade_is_refused():
    rng = np.random.default_rng(1)
    grades, prompts = rng.integers(1, 11, 60), rng.integers(0, 12, 60)
    first = mean_grade(grades, prompts, rounds=300, seed=4)
    assert first == mean_grade(grades, prompts, rounds=300, seed=4)
    assert first.lower is not None and first.mean is not None and first.upper is not None
    assert first.lower <= first.mean <= first.upper
    with pytest.raises(ValueError, match="missing"):
        mean_grade([1.0, float("nan")], [1, 2], rounds=10, seed=0)
