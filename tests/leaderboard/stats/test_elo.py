import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats import ratings
from leaderboard.stats.ratings import (
    RATING_COLUMNS,
    bootstrap_battle_indices,
    canonical_battle_order,
    elo_bootstrap,
    elo_online,
    win_rate_matrix,
)


def simulated_battles(seed: int, n: int, strengths: dict[str, float]) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = np.array(list(strengths))
    elo = np.array(list(strengths.values()))
    a = rng.integers(0, len(names), n)
    b = (a + rng.integers(1, len(names), n)) % len(names)
    p_a = 1.0 / (1.0 + 10 ** ((elo[b] - elo[a]) / 400))
    u = rng.random(n)
    winner = np.where(u < 0.15, "tie", np.where(u < 0.15 + 0.85 * p_a, "model_a", "model_b"))
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def plain_online_elo(
    battles: pd.DataFrame, order: np.ndarray, k: float = 4.0, init: float = 1000.0
) -> dict[str, float]:
    """The LMSYS notebook's compute_online_elo, one battle at a time."""
    rating: dict[str, float] = {}
    rows = battles[["model_a", "model_b", "winner"]].to_numpy()
    for i in order:
        model_a, model_b, winner = rows[i]
        ra, rb = rating.get(model_a, init), rating.get(model_b, init)
        ea = 1 / (1 + 10 ** ((rb - ra) / 400))
        eb = 1 / (1 + 10 ** ((ra - rb) / 400))
        sa = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[winner]
        rating[model_a] = ra + k * (sa - ea)
        rating[model_b] = rb + k * (1 - sa - eb)
    return rating


@pytest.fixture(params=["numba", "numpy"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the compiled loop (numba is a pinned requirement) and numpy lockstep."""
    monkeypatch.setattr(ratings, "_ENGINE", request.param)
    return str(request.param)


STRENGTHS = {"gpt-4": 1200.0, "claude": 1120.0, "vicuna": 1000.0, "alpaca": 900.0, "llama": 850.0}


def test_elo_bootstrap_equals_a_plain_per_battle_loop_over_the_same_samples(engine: str) -> None:
    battles = simulated_battles(1, 400, STRENGTHS)
    rounds, seed = 60, 123

    result = elo_bootstrap(battles, rounds=rounds, seed=seed).set_index("model")

    samples = canonical_battle_order(battles)[bootstrap_battle_indices(len(battles), rounds, seed)]
    per_round = pd.DataFrame([plain_online_elo(battles, sample) for sample in samples])
    expected = per_round.quantile([0.025, 0.5, 0.975])
    for model in STRENGTHS:
        assert result.loc[model, "rating"] == pytest.approx(expected.loc[0.5, model], abs=1e-9)
        assert result.loc[model, "lower"] == pytest.approx(expected.loc[0.025, model], abs=1e-9)
        assert result.loc[model, "upper"] == pytest.approx(expected.loc[0.975, model], abs=1e-9)


def test_elo_bootstrap_consumes_its_draws_in_blocks_without_changing_them(
    monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    # A small block budget makes 150 battle positions arrive in 13 blocks of 12.
    monkeypatch.setattr(ratings, "_BLOCK_CELLS", 500)
    battles = simulated_battles(2, 150, STRENGTHS)
    rounds, seed = 40, 5

    result = elo_bootstrap(battles, rounds=rounds, seed=seed).set_index("model")

    samples = canonical_battle_order(battles)[bootstrap_battle_indices(len(battles), rounds, seed)]
    median = pd.DataFrame([plain_online_elo(battles, s) for s in samples]).median()
    for model in STRENGTHS:
        assert result.loc[model, "rating"] == pytest.approx(median[model], abs=1e-9)


def test_a_model_missing_from_a_bootstrap_round_is_skipped_in_that_round(engine: str) -> None:
    battles = simulated_battles(7, 60, STRENGTHS)
    battles.loc[0] = ["rare", "llama", "model_a"]
    rounds, seed = 200, 11
    samples = canonical_battle_order(battles)[bootstrap_battle_indices(len(battles), rounds, seed)]
    assert 20 < sum(0 not in sample for sample in samples) < rounds - 20

    result = elo_bootstrap(battles, rounds=rounds, seed=seed).set_index("model")

    # A round without "rare" has no rating for it (NaN), which the quantiles skip.
    per_round = pd.DataFrame([plain_online_elo(battles, sample) for sample in samples])
    expected = per_round["rare"].quantile([0.025, 0.5, 0.975]).to_numpy()
    actual = result.loc["rare", ["lower", "rating", "upper"]].to_numpy(dtype=float)
    assert actual == pytest.approx(expected, abs=1e-9)


def test_elo_bootstrap_ranks_simulated_models_by_their_true_strength() -> None:
    battles = simulated_battles(3, 4000, STRENGTHS)

    result = elo_bootstrap(battles, rounds=200, seed=0)

    assert list(result["model"]) == list(STRENGTHS)
    assert (result["lower"] <= result["rating"]).all()
    assert (result["rating"] <= result["upper"]).all()
    assert list(result.columns) == RATING_COLUMNS


def test_elo_bootstrap_is_reproducible_with_a_seed_and_varies_without() -> None:
    battles = simulated_battles(4, 300, STRENGTHS)

    first = elo_bootstrap(battles, rounds=30, seed=1)
    again = elo_bootstrap(battles, rounds=30, seed=1)
    other = elo_bootstrap(battles, rounds=30, seed=2)

    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["upper"], other.set_index("model").loc[first["model"], "upper"])


def test_elo_online_applies_the_update_rule_in_the_given_order(engine: str) -> None:
    battles = pd.DataFrame(
        {"model_a": ["x", "y"], "model_b": ["y", "x"], "winner": ["model_a", "tie"]}
    )

    result = elo_online(battles, k=32).set_index("model")

    # First battle: expected 0.5 each, x gains 16. Second: y (984) ties x (1016).
    e_y = 1 / (1 + 10 ** ((1016 - 984) / 400))
    assert result.loc["y", "rating"] == pytest.approx(984 + 32 * (0.5 - e_y))
    assert result.loc["x", "rating"] == pytest.approx(1016 - 32 * (0.5 - e_y))
    assert result["lower"].isna().all() and result["upper"].isna().all()


def test_elo_online_equals_the_plain_loop_on_a_long_sequence(engine: str) -> None:
    battles = simulated_battles(6, 2000, STRENGTHS)

    result = elo_online(battles).set_index("model")["rating"]

    expected = plain_online_elo(battles, np.arange(len(battles)))
    for model, rating in expected.items():
        assert result[model] == pytest.approx(rating, abs=1e-9)


def test_no_battles_give_an_empty_leaderboard() -> None:
    empty = pd.DataFrame({"model_a": [], "model_b": [], "winner": []})

    assert elo_bootstrap(empty, rounds=10).empty
    assert list(elo_online(empty).columns) == RATING_COLUMNS


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        pytest.param([("x", "x", "model_a")], "itself", id="self battle"),
        pytest.param([("x", "y", "draw")], "winner", id="unknown winner"),
    ],
)
def test_invalid_battles_are_rejected(rows: list[tuple[str, str, str]], message: str) -> None:
    battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])

    with pytest.raises(ValueError, match=message):
        elo_bootstrap(battles, rounds=2)


def test_win_rate_matrix_counts_a_tie_as_half_a_win() -> None:
    battles = pd.DataFrame(
        {
            "model_a": ["x", "y", "x", "x"],
            "model_b": ["y", "x", "y", "z"],
            "winner": ["model_a", "model_a", "tie", "model_b"],
        }
    )

    half = win_rate_matrix(battles)
    dropped = win_rate_matrix(battles, ties="drop")

    assert half.loc["x", "y"] == pytest.approx(1.5 / 3)
    assert half.loc["y", "x"] == pytest.approx(1.5 / 3)
    assert dropped.loc["x", "y"] == pytest.approx(0.5)
    assert half.loc["z", "x"] == 1.0
    assert math.isnan(half.loc["y", "z"]) and math.isnan(half.loc["x", "x"])


def test_a_new_process_loads_the_elo_kernel_from_numbas_disk_cache(tmp_path: Path) -> None:
    """The first process on a machine compiles the kernel and stores it; the next loads it."""
    script = (
        "import pandas as pd\n"
        "from leaderboard.stats import ratings\n"
        "b = pd.DataFrame({'model_a': ['x', 'y'], 'model_b': ['y', 'x'],"
        " 'winner': ['tie', 'model_a']})\n"
        "ratings.elo_bootstrap(b, rounds=2)\n"
        "stats = ratings._elo_draws_compiled.stats\n"
        "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": os.getcwd()}

    def run() -> list[int]:
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True
        )
        return [int(v) for v in out.stdout.split()]

    assert run() == [0, 1]  # compiled, and written to the cache
    assert run() == [1, 0]  # loaded from it
    assert any(tmp_path.rglob("*.nbi"))
