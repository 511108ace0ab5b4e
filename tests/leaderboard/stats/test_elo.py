import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats import elo, elo_kernel
from leaderboard.stats.battles import RATING_COLUMNS
from leaderboard.stats.elo import (
    canonical_battle_order,
    elo_bootstrap,
    elo_bootstrap_ties_kept_and_dropped,
)
from leaderboard.stats.elo_kernel import bootstrap_battle_indices
from tests.leaderboard.reference_elo import (
    canonical_order,
    elo_bootstrap_reference,
    online_elo,
    prompt_rounds,
    vote_rounds,
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


def random_battles(seed: int, n: int, models: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = np.array([f"m{i}" for i in range(models)], dtype=object)
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    winner = np.array(["model_a", "model_b", "tie"], dtype=object)[rng.integers(0, 3, n)]
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


STRENGTHS = {"gpt-4": 1200.0, "claude": 1120.0, "vicuna": 1000.0, "alpaca": 900.0, "llama": 850.0}


def prompts_of(n: int, prompts: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, prompts, n)


def test_the_reference_applies_the_elo_update_in_the_given_order() -> None:
    rows = [("x", "y", "model_a"), ("y", "x", "tie")]

    rating = online_elo(rows, [0, 1], k=32)

    # First battle: expected 0.5 each, x gains 16. Second: y (984) ties x (1016).
    e_y = 1 / (1 + 10 ** ((1016 - 984) / 400))
    assert rating["y"] == pytest.approx(984 + 32 * (0.5 - e_y))
    assert rating["x"] == pytest.approx(1016 - 32 * (0.5 - e_y))


def test_the_vectorised_draws_and_numbering_follow_the_documented_protocol() -> None:
    battles = random_battles(3, 50, models=4)
    clusters = prompts_of(50, 7, 3)

    assert bootstrap_battle_indices(50, 6, seed=4).tolist() == vote_rounds(50, 6, seed=4)
    assert canonical_battle_order(battles).tolist() == canonical_order(battles)
    assert canonical_battle_order(battles, clusters).tolist() == canonical_order(
        battles, clusters.tolist()
    )


@pytest.mark.parametrize("unit", ["vote", "prompt"])
@pytest.mark.parametrize(
    ("models", "n", "k", "seed"),
    [(5, 400, 4.0, 0), (5, 300, 4.0, 1), (12, 1500, 4.0, 2), (6, 600, 32.0, 3), (5, 300, 200.0, 4)],
)
def test_elo_bootstrap_equals_the_per_battle_reference_over_the_same_draws(
    unit: str, models: int, n: int, k: float, seed: int
) -> None:
    # 12 models make 396 kinds (bucket tables crossing many kinds); k = 4 takes the short
    # series of exp, k = 32 the long one, k = 200 the exp branch.
    battles = random_battles(seed, n, models=models)
    clusters = prompts_of(n, n // 12, seed) if unit == "prompt" else None

    fast = elo_bootstrap(battles, rounds=20, seed=seed, k=k, clusters=clusters)

    expected = elo_bootstrap_reference(
        battles, rounds=20, seed=seed, k=k, clusters=None if clusters is None else list(clusters)
    )
    pd.testing.assert_frame_equal(fast, expected, check_exact=False, rtol=1e-12)


@pytest.mark.parametrize(("models", "seed"), [(5, 3), (12, 4)])
def test_both_boards_of_one_prompt_resample_equal_the_reference(models: int, seed: int) -> None:
    # The board without ties plays each round's sequence less its ties; the board with them is
    # the one elo_bootstrap gives.
    battles = random_battles(seed, 240, models=models)
    clusters = prompts_of(240, 20, seed)

    kept, dropped = elo_bootstrap_ties_kept_and_dropped(
        battles, clusters=clusters, rounds=20, seed=seed
    )

    assert_same = pd.testing.assert_frame_equal
    assert_same(kept, elo_bootstrap(battles, rounds=20, seed=seed, clusters=clusters))
    reference = elo_bootstrap_reference(
        battles, rounds=20, seed=seed, clusters=list(clusters), drop_ties=True
    )
    assert_same(dropped, reference, check_exact=False, rtol=1e-12)
    # Not the board of the ties kept: the ties moved the ratings.
    assert not np.allclose(
        dropped.sort_values("model")["rating"], kept.sort_values("model")["rating"]
    )


@pytest.mark.parametrize("width", [np.uint8, np.uint16, np.uint32])
def test_the_prompt_kernel_gives_the_same_boards_whatever_width_numbers_the_kinds(
    width: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kinds are held in the narrowest type that numbers them (8 bits up to 9 models, 16 up
    # to 147); each width's machine code replays the reference's sequences.
    battles = random_battles(7, 240, models=5)
    clusters = prompts_of(240, 20, 7)
    monkeypatch.setattr(elo, "_kind_dtype", lambda kinds: width)

    kept, dropped = elo_bootstrap_ties_kept_and_dropped(
        battles, clusters=clusters, rounds=12, seed=5
    )

    for board, drop_ties in ((kept, False), (dropped, True)):
        reference = elo_bootstrap_reference(
            battles, rounds=12, seed=5, clusters=list(clusters), drop_ties=drop_ties
        )
        pd.testing.assert_frame_equal(board, reference, check_exact=False, rtol=1e-12)


def test_kinds_are_numbered_in_the_narrowest_type_that_holds_them() -> None:
    widths = [elo._kind_dtype(kinds) for kinds in (1, 256, 257, 65_536, 65_537)]
    assert widths == [np.uint8, np.uint8, np.uint16, np.uint16, np.uint32]


def test_the_warm_up_loads_the_prompt_kernel_for_every_width() -> None:
    # A study of 12 models (396 kinds) needs the 16-bit kernel: after the warm-up, it
    # compiles nothing in the analysis worker's first report.
    elo.elo_kernel_warm()
    loaded = len(elo_kernel.elo_prompts_compiled.signatures)

    elo_bootstrap(random_battles(8, 600, models=12), rounds=4, clusters=prompts_of(600, 30, 8))

    assert len(elo_kernel.elo_prompts_compiled.signatures) == loaded == 3


def test_a_model_with_only_ties_is_left_off_the_board_without_ties() -> None:
    battles = pd.DataFrame(
        {
            "model_a": ["a", "a", "b", "c"],
            "model_b": ["b", "b", "a", "a"],
            "winner": ["model_a", "model_b", "model_a", "tie"],
        }
    )

    kept, dropped = elo_bootstrap_ties_kept_and_dropped(battles, clusters=[1, 2, 3, 4], rounds=8)

    assert sorted(kept["model"]) == ["a", "b", "c"]
    assert sorted(dropped["model"]) == ["a", "b"]


def test_only_ties_give_an_empty_board_without_ties() -> None:
    battles = pd.DataFrame({"model_a": ["a", "b"], "model_b": ["b", "c"], "winner": ["tie"] * 2})

    kept, dropped = elo_bootstrap_ties_kept_and_dropped(battles, clusters=[1, 2], rounds=8)

    assert sorted(kept["model"]) == ["a", "b", "c"]
    assert dropped.empty and list(dropped.columns) == RATING_COLUMNS


@pytest.mark.parametrize("unit", ["vote", "prompt"])
def test_a_model_missing_from_a_bootstrap_round_is_skipped_in_that_round(unit: str) -> None:
    battles = simulated_battles(7, 60, STRENGTHS)
    battles.loc[0] = ["rare", "llama", "model_a"]
    clusters = np.arange(60) % 30 if unit == "prompt" else None

    result = elo_bootstrap(battles, rounds=200, seed=11, clusters=clusters).set_index("model")

    # A round without "rare" has no rating for it (NaN), which the quantiles skip.
    expected = elo_bootstrap_reference(
        battles, rounds=200, seed=11, clusters=None if clusters is None else list(clusters)
    ).set_index("model")
    actual = result.loc["rare", ["lower", "rating", "upper"]].to_numpy(dtype=float)
    assert actual == pytest.approx(expected.loc["rare", ["lower", "rating", "upper"]], abs=1e-9)


def test_a_prompt_round_replays_whole_prompts_drawn_with_replacement_in_a_shuffled_order() -> None:
    sizes = [3, 1, 4, 2, 5]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    prompt_of = np.repeat(np.arange(len(sizes)), sizes)

    rounds = prompt_rounds(sizes, 400, seed=2)

    drawn_total = np.zeros(len(sizes))
    for sequence in rounds:
        battles = np.bincount(sequence, minlength=starts[-1])
        # Every battle of a prompt comes as often as its prompt was drawn.
        times = battles[starts[:-1]]
        assert (battles == np.repeat(times, sizes)).all()
        assert times.sum() == len(sizes)
        drawn_total += times
    # Each prompt is drawn once per round on average; the order is not the listed one.
    assert np.abs(drawn_total / 400 - 1).max() < 0.15
    assert sum(list(prompt_of[s]) != sorted(prompt_of[s]) for s in rounds) > 300


def heterogeneous_battles(seed: int, prompts: int, per_prompt: int, effect: float) -> pd.DataFrame:
    """Battles of x against y whose winner depends on the prompt: on each prompt x's chance is
    0.5 moved up or down by ``effect`` (0: every prompt alike)."""
    rng = np.random.default_rng(seed)
    chance = 0.5 + effect * rng.choice([-1.0, 1.0], prompts)
    prompt = np.repeat(np.arange(prompts), per_prompt)
    wins = rng.random(prompts * per_prompt) < chance[prompt]
    return pd.DataFrame(
        {
            "model_a": "x",
            "model_b": "y",
            "winner": np.where(wins, "model_a", "model_b"),
            "prompt": prompt,
        }
    )


def interval_width(battles: pd.DataFrame, clusters: np.ndarray | None) -> float:
    result = elo_bootstrap(battles, rounds=400, seed=5, clusters=clusters).set_index("model")
    return float(result["upper"].loc["x"] - result["lower"].loc["x"])


def test_resampling_prompts_widens_the_interval_when_prompts_differ_and_not_when_alike() -> None:
    # Prompts that split 90/10 one way or the other: the votes on one prompt move together, so
    # the spread over new prompts is about twice what resampling the votes one by one sees
    # (design effect 1 + (m - 1) rho with m = 20 votes a prompt, rho = 0.64: about 4.4x the
    # variance, 2.1x the width).
    split = heterogeneous_battles(1, prompts=40, per_prompt=20, effect=0.4)
    alike = heterogeneous_battles(2, prompts=40, per_prompt=20, effect=0.0)

    split_ratio = interval_width(split, split["prompt"].to_numpy()) / interval_width(split, None)
    alike_ratio = interval_width(alike, alike["prompt"].to_numpy()) / interval_width(alike, None)

    assert split_ratio > 1.6
    assert 0.8 < alike_ratio < 1.25


@pytest.mark.parametrize("unit", ["vote", "prompt"])
def test_elo_bootstrap_is_reproducible_with_a_seed_and_varies_without(unit: str) -> None:
    battles = simulated_battles(4, 300, STRENGTHS)
    clusters = prompts_of(300, 25, 4) if unit == "prompt" else None

    first = elo_bootstrap(battles, rounds=30, seed=1, clusters=clusters)
    again = elo_bootstrap(battles, rounds=30, seed=1, clusters=clusters)
    other = elo_bootstrap(battles, rounds=30, seed=2, clusters=clusters)

    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["upper"], other.set_index("model").loc[first["model"], "upper"])


@pytest.mark.parametrize("unit", ["vote", "prompt"])
def test_elo_bootstrap_does_not_depend_on_the_order_of_the_rows(unit: str) -> None:
    battles = random_battles(8, 2000, models=6)
    battles["prompt"] = [f"q{p}" for p in prompts_of(2000, 150, 8)]
    shuffled = battles.sample(frac=1.0, random_state=1).reset_index(drop=True)

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        clusters = frame["prompt"].to_numpy() if unit == "prompt" else None
        return elo_bootstrap(frame, rounds=30, seed=2, clusters=clusters)

    pd.testing.assert_frame_equal(run(battles), run(shuffled), check_exact=False, rtol=1e-12)


@pytest.mark.parametrize("unit", ["vote", "prompt"])
def test_elo_bootstrap_uses_several_threads_without_changing_the_ratings(
    monkeypatch: pytest.MonkeyPatch, unit: str
) -> None:
    battles = random_battles(5, 3000, models=4)
    clusters = prompts_of(3000, 200, 5) if unit == "prompt" else None
    single = elo_bootstrap(battles, rounds=40, seed=2, clusters=clusters)
    monkeypatch.setattr(elo, "_THREAD_MIN_UPDATES", 0)
    monkeypatch.setattr(elo, "_threads", lambda: 3)

    pd.testing.assert_frame_equal(
        single, elo_bootstrap(battles, rounds=40, seed=2, clusters=clusters)
    )


def test_a_prompt_round_with_more_battles_than_the_study_has_keeps_its_draws() -> None:
    # One prompt holds most battles: a round that draws it twice plays more battles than there
    # are, and the kernel makes room without losing the rounds drawn before it in its group.
    battles = random_battles(6, 200, models=4)
    clusters = np.where(np.arange(200) < 170, 0, 1 + np.arange(200) % 5)

    fast = elo_bootstrap(battles, rounds=24, seed=3, clusters=clusters)

    expected = elo_bootstrap_reference(battles, rounds=24, seed=3, clusters=list(clusters))
    pd.testing.assert_frame_equal(fast, expected, check_exact=False, rtol=1e-12)


def test_bootstrap_draws_are_uniform_over_the_battles_and_differ_between_rounds() -> None:
    draws = bootstrap_battle_indices(10, 20_000, seed=3)

    counts = np.bincount(draws.ravel(), minlength=10)
    # Each battle is drawn 20 000 times in expectation, with a standard deviation of about 134.
    assert np.abs(counts - 20_000).max() < 700
    assert not (draws[0] == draws[1]).all()


def test_elo_bootstrap_ranks_simulated_models_by_their_true_strength() -> None:
    battles = simulated_battles(3, 4000, STRENGTHS)

    result = elo_bootstrap(battles, rounds=200, seed=0, clusters=np.arange(4000) // 10)

    assert list(result["model"]) == list(STRENGTHS)
    assert (result["lower"] <= result["rating"]).all()
    assert (result["rating"] <= result["upper"]).all()
    assert list(result.columns) == RATING_COLUMNS


def test_no_battles_give_an_empty_leaderboard() -> None:
    empty = pd.DataFrame({"model_a": [], "model_b": [], "winner": []})

    assert elo_bootstrap(empty, rounds=10).empty
    assert list(elo_bootstrap(empty, rounds=10, clusters=[]).columns) == RATING_COLUMNS


@pytest.mark.parametrize(
    ("rows", "clusters", "message"),
    [
        pytest.param([("x", "x", "model_a")], None, "itself", id="self battle"),
        pytest.param([("x", "y", "draw")], None, "winner", id="unknown winner"),
        pytest.param([("x", "y", "tie")], [1, 2], "one prompt id per battle", id="clusters"),
        pytest.param([("x", "y", "tie")], [math.nan], "missing", id="missing prompt"),
    ],
)
def test_invalid_battles_are_rejected(
    rows: list[tuple[str, str, str]], clusters: list[float] | None, message: str
) -> None:
    battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])

    with pytest.raises(ValueError, match=message):
        elo_bootstrap(battles, rounds=2, clusters=clusters)


def test_a_new_process_loads_the_elo_kernel_from_numbas_disk_cache(tmp_path: Path) -> None:
    """The first process on a machine compiles the kernel and stores it; the next loads it."""
    script = (
        "import pandas as pd\n"
        "from leaderboard.stats import elo, elo_kernel\n"
        "b = pd.DataFrame({'model_a': ['x', 'y'], 'model_b': ['y', 'x'],"
        " 'winner': ['tie', 'model_a']})\n"
        "elo.elo_bootstrap(b, rounds=2)\n"
        "elo.elo_bootstrap(b, rounds=2, clusters=[1, 2])\n"
        "kernels = (elo_kernel.elo_draws_compiled, elo_kernel.elo_prompts_compiled)\n"
        "hits = sum(sum(k.stats.cache_hits.values()) for k in kernels)\n"
        "misses = sum(sum(k.stats.cache_misses.values()) for k in kernels)\n"
        "print(hits, misses)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": os.getcwd()}

    def run() -> list[int]:
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True
        )
        return [int(v) for v in out.stdout.split()]

    assert run() == [0, 2]  # compiled, and written to the cache
    assert run() == [2, 0]  # loaded from it
    assert any(tmp_path.rglob("*.nbi"))
