"""The fast paths of the statistics give the numbers of the straightforward computations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats import ratings
from leaderboard.stats.pairwise import bootstrap_agreement_ci
from leaderboard.stats.ratings import (
    bootstrap_battle_indices,
    canonical_battle_order,
    elo_bootstrap,
)


def random_battles(seed: int, n: int, models: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = np.array([f"m{i}" for i in range(models)], dtype=object)
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    winner = np.array(["model_a", "model_b", "tie"], dtype=object)[rng.integers(0, 3, n)]
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def elo_by_loops(battles: pd.DataFrame, rounds: int, seed: int, k: float = 4.0) -> pd.DataFrame:
    """The LMSYS procedure written out: replay each round's bootstrap sample with online Elo."""
    draws = bootstrap_battle_indices(len(battles), rounds, seed)
    ordered = battles.iloc[canonical_battle_order(battles)]
    rows = list(ordered.itertuples(index=False))
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    per_round = []
    for r in range(rounds):
        rating: dict[str, float] = {}
        for i in draws[r]:
            a, b, winner = rows[i]
            ra, rb = rating.get(a, 0.0), rating.get(b, 0.0)
            score = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[winner]
            delta = k * (score - 1.0 / (1.0 + np.exp((rb - ra) * (math.log(10.0) / 400.0))))
            rating[a], rating[b] = ra + delta, rb - delta
        per_round.append([rating[m] + 1000.0 if m in rating else np.nan for m in models])
    lower, median, upper = np.nanquantile(np.array(per_round), [0.025, 0.5, 0.975], axis=0)
    frame = pd.DataFrame({"model": models, "rating": median, "lower": lower, "upper": upper})
    return frame.sort_values(["rating", "model"], ascending=[False, True]).reset_index(drop=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_elo_bootstrap_equals_the_procedure_written_as_loops(seed: int) -> None:
    battles = random_battles(seed, 300)

    fast = elo_bootstrap(battles, rounds=20, seed=seed)

    pd.testing.assert_frame_equal(
        fast, elo_by_loops(battles, 20, seed), check_exact=False, rtol=1e-12
    )


def test_compiled_elo_bootstrap_equals_the_numpy_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    battles = random_battles(7, 2000, models=8)
    # Small blocks for the numpy engine, so that its draws span many blocks.
    monkeypatch.setattr(ratings, "_BLOCK_CELLS", 997)
    fast = elo_bootstrap(battles, rounds=30, seed=11)
    monkeypatch.setattr(ratings, "_ENGINE", "numpy")

    pd.testing.assert_frame_equal(
        fast, elo_bootstrap(battles, rounds=30, seed=11), check_exact=False, rtol=1e-12
    )


def test_bootstrap_draws_are_uniform_over_the_battles_and_differ_between_rounds() -> None:
    draws = bootstrap_battle_indices(10, 20_000, seed=3)

    counts = np.bincount(draws.ravel(), minlength=10)
    # Each battle is drawn 20 000 times in expectation, with a standard deviation of about 134.
    assert np.abs(counts - 20_000).max() < 700
    assert not (draws[0] == draws[1]).all()


def test_compiled_elo_bootstrap_uses_several_threads_without_changing_the_ratings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    battles = random_battles(5, 3000, models=4)
    single = elo_bootstrap(battles, rounds=40, seed=2)
    monkeypatch.setattr(ratings, "_THREAD_MIN_UPDATES", 0)
    monkeypatch.setattr(ratings, "_threads", lambda: 3)

    pd.testing.assert_frame_equal(single, elo_bootstrap(battles, rounds=40, seed=2))


def test_agreement_interval_equals_resampling_unit_types_by_loops() -> None:
    rng = np.random.default_rng(3)
    total = rng.integers(0, 7, 500)
    agree = rng.binomial(total, 0.6)

    fast = bootstrap_agreement_ci(agree, total, rounds=200, seed=8)

    types = sorted(set(zip(agree.tolist(), total.tolist(), strict=True)))
    counts = [sum(1 for u in zip(agree, total, strict=True) if tuple(u) == t) for t in types]
    draws = np.random.default_rng(8).multinomial(500, np.array(counts) / 500, size=200)
    rates = []
    for row in draws:
        picked_total = sum(int(w) * t for w, (_, t) in zip(row, types, strict=True))
        picked_agree = sum(int(w) * a for w, (a, _) in zip(row, types, strict=True))
        rates.append(picked_agree / picked_total if picked_total else math.nan)
    lower, upper = np.nanquantile(rates, [0.025, 0.975])
    assert (fast.lower, fast.upper) == (lower, upper)
    assert fast.rate == agree.sum() / total.sum()


def test_agreement_interval_matches_resampling_units_one_by_one_in_distribution() -> None:
    rng = np.random.default_rng(4)
    total = rng.integers(1, 6, 400)
    agree = rng.binomial(total, 0.7)
    draws = np.random.default_rng(1).integers(0, 400, size=(4000, 400))
    rates = agree[draws].sum(axis=1) / total[draws].sum(axis=1)

    fast = bootstrap_agreement_ci(agree, total, rounds=4000, seed=2)

    by_units = np.quantile(rates, [0.025, 0.975])
    assert fast.lower == pytest.approx(by_units[0], abs=0.004)
    assert fast.upper == pytest.approx(by_units[1], abs=0.004)


@pytest.mark.parametrize(
    ("models", "n", "k"), [(12, 3000, 4.0), (6, 1000, 32.0), (5, 400, 200.0), (2, 1, 4.0)]
)
def test_compiled_elo_bootstrap_equals_the_loops_with_many_kinds_and_a_large_k(
    models: int, n: int, k: float
) -> None:
    # 12 models make 396 kinds (more than a byte, bucket tables crossing many kinds); k = 4 takes
    # the short series, k = 32 the long one, k = 200 the exp branch; one battle is the smallest
    # sample.
    battles = random_battles(5, n, models=models)

    fast = elo_bootstrap(battles, rounds=20, seed=9, k=k)

    pd.testing.assert_frame_equal(
        fast, elo_by_loops(battles, 20, 9, k=k), check_exact=False, rtol=1e-12
    )


def test_elo_bootstrap_does_not_depend_on_the_order_of_the_rows() -> None:
    battles = random_battles(8, 2000, models=6)
    shuffled = battles.sample(frac=1.0, random_state=1).reset_index(drop=True)

    pd.testing.assert_frame_equal(
        elo_bootstrap(battles, rounds=30, seed=2),
        elo_bootstrap(shuffled, rounds=30, seed=2),
        check_exact=False,
        rtol=1e-12,
    )
