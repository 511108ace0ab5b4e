import numpy as np
import pytest

from leaderboard.stats.likert import canonical_score, collapse, preference_sign


def test_canonical_score_mirrors_the_scale_when_b_was_shown_on_the_left() -> None:
    shown = [1, 2, 4, 5, 8]

    assert canonical_score(shown, [True] * 5).tolist() == [1, 2, 4, 5, 8]
    assert canonical_score(shown, [False] * 5).tolist() == [8, 7, 5, 4, 1]


@pytest.mark.parametrize(
    ("ties", "expected"),
    [
        (True, ["A", "A", "A", "tie", "tie", "B", "B", "B"]),
        (False, ["A", "A", "A", "A", "B", "B", "B", "B"]),
    ],
)
def test_collapse_follows_the_design_conventions(ties: bool, expected: list[str]) -> None:
    assert collapse(np.arange(1, 9), ties=ties).tolist() == expected


@pytest.mark.parametrize("bad", [[0], [9], [2.5], ["3"]])
def test_scores_outside_whole_numbers_one_to_eight_are_rejected(bad: list[float | str]) -> None:
    with pytest.raises(ValueError):
        collapse(bad)


def test_preference_sign_maps_a_tie_b_to_minus_one_zero_one() -> None:
    assert preference_sign(["A", "tie", "B"]).tolist() == [-1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="unknown"):
        preference_sign(["left"])
