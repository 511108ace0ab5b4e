import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from leaderboard.stats.battles import RATING_COLUMNS, encode_battles
from leaderboard.stats.bradley_terry import _cells, _cluster_cells, bradley_terry

STRENGTHS = {"gpt-4": 1250.0, "claude": 1150.0, "vicuna": 1000.0, "alpaca": 900.0, "llama": 700.0}


def simulated_battles(seed: int, n: int, tie_share: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = np.array(list(STRENGTHS))
    elo = np.array(list(STRENGTHS.values()))
    a = rng.integers(0, len(names), n)
    b = (a + rng.integers(1, len(names), n)) % len(names)
    p_a = 1.0 / (1.0 + 10 ** ((elo[b] - elo[a]) / 400))
    u = rng.random(n)
    decisive = np.where(rng.random(n) < p_a, "model_a", "model_b")
    winner = np.where(u < tie_share, "tie", decisive)
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def scipy_bradley_terry(battles: pd.DataFrame) -> dict[str, float]:
    """Unpenalised BT log-likelihood over battles, ties as half a win, fitted by BFGS."""
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    index = {m: i for i, m in enumerate(models)}
    a = battles["model_a"].map(index).to_numpy()
    b = battles["model_b"].map(index).to_numpy()
    s = battles["winner"].map({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}).to_numpy()

    def negative_log_likelihood(free: np.ndarray) -> float:
        theta = np.concatenate([[0.0], free])  # the first model pinned at 0
        d = theta[a] - theta[b]
        return float(-(s * -np.logaddexp(0, -d) + (1 - s) * -np.logaddexp(0, d)).sum())

    fit = minimize(negative_log_likelihood, np.zeros(len(models) - 1), method="BFGS", tol=1e-10)
    theta = np.concatenate([[0.0], fit.x]) * 400 / math.log(10)
    theta += 1000 - theta.mean()
    return dict(zip(models, theta, strict=True))


def test_bradley_terry_recovers_known_strengths_from_simulated_battles() -> None:
    battles = simulated_battles(0, 30_000)

    result = bradley_terry(battles).set_index("model")["rating"]

    truth = pd.Series(STRENGTHS)
    truth += 1000 - truth.mean()
    assert list(result.index) == list(STRENGTHS)
    assert (result - truth).abs().max() < 20


@pytest.mark.parametrize("tie_share", [0.0, 0.3])
def test_bradley_terry_maximises_the_likelihood_written_independently(tie_share: float) -> None:
    battles = simulated_battles(1, 3000, tie_share)

    result = bradley_terry(battles).set_index("model")["rating"]

    expected = scipy_bradley_terry(battles)
    for model, rating in expected.items():
        assert result[model] == pytest.approx(rating, abs=0.05)


def test_bradley_terry_ratings_average_1000_or_pin_the_anchor_model() -> None:
    battles = simulated_battles(2, 2000)

    centred = bradley_terry(battles)
    anchored = bradley_terry(battles, anchor="vicuna").set_index("model")["rating"]

    assert centred["rating"].mean() == pytest.approx(1000.0)
    assert anchored["vicuna"] == pytest.approx(1000.0)
    gaps = centred.set_index("model")["rating"] - anchored
    assert np.allclose(gaps, gaps.iloc[0])


def test_a_model_that_never_loses_gets_a_finite_top_rating() -> None:
    battles = pd.DataFrame(
        {
            "model_a": ["champ"] * 10 + ["x", "y", "x"],
            "model_b": ["x", "y"] * 5 + ["y", "x", "y"],
            "winner": ["model_a"] * 10 + ["model_a", "model_a", "model_b"],
        }
    )

    result = bradley_terry(battles, rounds=50, seed=3)

    assert result["model"].iloc[0] == "champ"
    assert np.isfinite(result[["rating", "lower", "upper"]].to_numpy()).all()
    assert result["rating"].iloc[0] - result["rating"].iloc[1] < 3000


def test_bradley_terry_bootstrap_brackets_the_fit_and_is_reproducible() -> None:
    battles = simulated_battles(4, 3000, 0.2)

    first = bradley_terry(battles, rounds=100, seed=8)
    again = bradley_terry(battles, rounds=100, seed=8)

    pd.testing.assert_frame_equal(first, again)
    assert (first["lower"] < first["rating"]).all() and (first["rating"] < first["upper"]).all()
    # With 3000 battles among 5 models the 95% intervals are tens of points wide, not hundreds.
    assert ((first["upper"] - first["lower"]) < 120).all()


def test_bradley_terry_without_bootstrap_has_no_interval() -> None:
    result = bradley_terry(simulated_battles(5, 500))

    assert result["lower"].isna().all() and result["upper"].isna().all()
    assert list(result.columns) == RATING_COLUMNS


def test_ties_count_half_a_win_or_are_dropped() -> None:
    only_ties = pd.DataFrame({"model_a": ["x", "y"], "model_b": ["y", "z"], "winner": ["tie"] * 2})

    half = bradley_terry(only_ties).set_index("model")["rating"]
    dropped = bradley_terry(only_ties, ties="drop")

    assert half.to_numpy() == pytest.approx([1000.0, 1000.0, 1000.0])
    assert dropped.empty


def test_no_battles_give_an_empty_leaderboard() -> None:
    empty = pd.DataFrame({"model_a": [], "model_b": [], "winner": []})

    result = bradley_terry(empty, rounds=5)

    assert result.empty and list(result.columns) == RATING_COLUMNS


def test_battles_repeated_within_a_prompt_widen_the_prompt_bootstrap_interval() -> None:
    """Five copies of each battle under one prompt: resampling prompts sees 1/5 of the
    independent information that resampling battles pretends to see (about sqrt(5) wider)."""
    rng = np.random.default_rng(3)
    models = ["a", "b", "c"]
    rows = []
    for prompt in range(60):
        i, j = rng.choice(3, 2, replace=False)
        winner = str(rng.choice(["model_a", "model_b", "tie"]))
        rows += [(models[i], models[j], winner, prompt)] * 5
    battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner", "prompt"])
    by_battle = bradley_terry(battles, rounds=400, seed=1)
    by_prompt = bradley_terry(battles, rounds=400, seed=1, clusters=battles["prompt"])
    assert (by_prompt["rating"].to_numpy() == by_battle["rating"].to_numpy()).all()
    ratio = (by_prompt["upper"] - by_prompt["lower"]) / (by_battle["upper"] - by_battle["lower"])
    assert ratio.between(1.6, 3.0).all(), ratio.tolist()


def test_one_battle_per_prompt_gives_the_battle_bootstraps_interval_width() -> None:
    rng = np.random.default_rng(4)
    battles = pd.DataFrame(
        {
            "model_a": rng.choice(["a", "b"], 400),
            "model_b": "c",
            "winner": rng.choice(["model_a", "model_b", "tie"], 400),
        }
    )
    by_battle = bradley_terry(battles, rounds=800, seed=2)
    by_prompt = bradley_terry(battles, rounds=800, seed=2, clusters=np.arange(400))
    ratio = (by_prompt["upper"] - by_prompt["lower"]) / (by_battle["upper"] - by_battle["lower"])
    assert ratio.between(0.85, 1.15).all(), ratio.tolist()


def test_a_prompt_round_weighs_each_cell_by_the_battles_of_the_prompts_drawn() -> None:
    # Round r draws C prompt indices (rng.integers(0, C)); a cell's weight is how many of its
    # battles lie on those prompts, a prompt drawn twice counting twice.
    battles = simulated_battles(4, 300, tie_share=0.2)
    prompts = np.random.default_rng(4).integers(0, 40, 300)
    enc = encode_battles(battles)
    ca, cb, cs, counts = _cells(enc, "half")

    weights = _cluster_cells(enc, "half", prompts, len(counts))(np.random.default_rng(6), 30)

    ids = np.unique(prompts)
    picks = np.random.default_rng(6).integers(0, len(ids), size=(30, len(ids)))
    cell = {key: i for i, key in enumerate(zip(ca, cb, cs, strict=True))}
    expected = np.zeros((30, len(counts)))
    for r in range(30):
        for p in ids[picks[r]]:
            for i in np.flatnonzero(prompts == p):
                expected[r, cell[enc.a[i], enc.b[i], enc.score_a[i]]] += 1
    assert (weights == expected).all()
