import math
import random
from collections import Counter, defaultdict

import pandas as pd
import pytest

from leaderboard.stats.win_rates import win_rates_from_votes


def votes(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["system_a", "system_b", "label"])


def test_a_tie_counts_as_half_a_win_to_each_side() -> None:
    # x beat y once as A, y beat x once as A, one tie: x has 1.5 of 3 against y. z beat x once.
    frame = votes([("x", "y", "A"), ("y", "x", "A"), ("x", "y", "tie"), ("x", "z", "B")])

    models, rates, battles = win_rates_from_votes(frame)

    assert models == ["x", "y", "z"] and battles == 4
    x, y, z = 0, 1, 2
    assert rates[x, y] == pytest.approx(1.5 / 3) and rates[y, x] == pytest.approx(1.5 / 3)
    assert (rates[z, x], rates[x, z]) == (1.0, 0.0)
    assert math.isnan(rates[y, z]) and math.isnan(rates[z, y])  # never met
    assert all(math.isnan(rates[i, i]) for i in range(3))


def test_a_models_votes_against_itself_are_left_out() -> None:
    models, rates, battles = win_rates_from_votes(votes([("x", "x", "A"), ("x", "y", "B")]))

    assert models == ["x", "y"] and battles == 1
    assert (rates[0, 1], rates[1, 0]) == (0.0, 1.0)


def test_no_votes_give_no_models() -> None:
    models, rates, battles = win_rates_from_votes(votes([]))

    assert models == [] and rates.shape == (0, 0) and battles == 0


def test_rates_from_counts_equal_a_count_battle_by_battle() -> None:
    rng = random.Random(5)
    rows = [
        (a, b, rng.choice(["A", "B", "tie"]))
        for _ in range(300)
        for a, b in [rng.sample(["m1", "m2", "m3", "m4"], 2)]
    ] + [("m5", "m5", "A"), ("m1", "m6", "tie")]
    frame = votes(rows)
    frame["label"] = pd.Categorical(frame["label"], categories=["A", "B", "tie"])

    models, rates, battles = win_rates_from_votes(frame)

    wins: defaultdict[tuple[str, str], float] = defaultdict(float)
    games: Counter[tuple[str, str]] = Counter()
    for a, b, label in rows:
        if a == b:
            continue
        score = {"A": 1.0, "B": 0.0, "tie": 0.5}[label]
        wins[(a, b)] += score
        wins[(b, a)] += 1.0 - score
        games[(a, b)] += 1
        games[(b, a)] += 1
    assert battles == 301
    assert models == ["m1", "m2", "m3", "m4", "m6"]
    for i, row in enumerate(models):
        for j, column in enumerate(models):
            if games[(row, column)]:
                assert rates[i, j] == pytest.approx(wins[(row, column)] / games[(row, column)])
            else:
                assert math.isnan(rates[i, j])
