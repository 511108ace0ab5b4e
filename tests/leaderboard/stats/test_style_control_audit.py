"""Audit of the style-controlled rankings against the packages their methods come from: the
length-controlled win rate against alpaca_eval's own GLM (``get_length_controlled_winrate``),
the contextual Bradley-Terry fit and its sandwich intervals against arena-rank's
``ContextualBradleyTerry``, on the same simulated votes.

Both packages are installed from requirements-audit.txt (the Makefile's test environment,
``--no-deps``); they are imported here, not skipped when missing, so that a test environment
without them fails.
"""

from __future__ import annotations

import sys
import types
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from packaging.version import parse as parse_version

from leaderboard.stats.style_control import (
    contextual_bradley_terry,
    length_controlled_win_rate,
    style_differences,
)


def _pkg_resources_stand_in() -> None:
    """alpaca_eval.utils imports pkg_resources (gone from setuptools 81+) for parse_version and
    get_distribution only; give it those two, from packaging and importlib.metadata."""
    if "pkg_resources" in sys.modules:
        return
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("pkg_resources")
        stand_in.parse_version = parse_version  # type: ignore[attr-defined]
        stand_in.get_distribution = lambda name: types.SimpleNamespace(  # type: ignore[attr-defined]
            version=metadata.version(name)
        )
        sys.modules["pkg_resources"] = stand_in


def _alpaca_glm() -> types.ModuleType:
    _pkg_resources_stand_in()
    from alpaca_eval.metrics import glm_winrate

    return glm_winrate


def _annotations(seed: int, prompts: int = 400) -> pd.DataFrame:
    """AlpacaEval annotations of one model (output_2) against a baseline (output_1): the model's
    answers longer on average, the judge preferring longer answers, some ties (1.5)."""
    rng = np.random.default_rng(seed)
    len_base = rng.integers(200, 1200, prompts)
    len_model = np.clip(len_base + rng.normal(150, 300, prompts).astype(int), 20, None)
    diff = (len_model - len_base) / np.std(len_model - len_base, ddof=1)
    p = 1 / (1 + np.exp(-(0.3 + 0.9 * np.tanh(diff))))
    won = rng.random(prompts) < p
    preference = np.where(won, 2.0, 1.0)
    preference[rng.random(prompts) < 0.1] = 1.5
    return pd.DataFrame(
        {
            "output_1": ["x" * int(n) for n in len_base],
            "output_2": ["y" * int(n) for n in len_model],
            "preference": preference,
            "index": np.arange(prompts),
            "generator_1": "baseline",
            "generator_2": "model",
            "annotator": "judge",
        }
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_length_controlled_win_rate_matches_alpaca_eval(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    glm = _alpaca_glm()
    annotations = _annotations(seed)
    # alpaca_eval reads each instruction's difficulty from the Hugging Face hub even for the
    # GLM that leaves it out; the file is served from disk (the network edge).
    difficulty = tmp_path / "df_gamed.csv"
    pd.DataFrame(
        {"index": annotations["index"], "instruction_difficulty": 0.0, "model": "none"}
    ).to_csv(difficulty, index=False)
    monkeypatch.setattr(glm, "hf_hub_download", lambda **_: str(difficulty))
    # alpaca_eval's fit as it ships (an L1 penalty picked by 5-fold cross-validation), and the
    # same GLM unpenalised (C = 1e8, no cross-validation): the likelihood Concord maximises.
    shipped = glm.get_length_controlled_winrate(
        annotations.copy(),
        glm_name="length_controlled_minimal",
        save_weights_dir=None,
        is_warn_extreme_changes=False,
    )
    unpenalised = {**glm.GLM_INFO["length_controlled_minimal"], "kwargs": {"n_splits": 0, "C": 1e8}}
    theirs = glm.get_length_controlled_winrate(
        annotations.copy(),
        glm_info=unpenalised,
        save_weights_dir=None,
        is_warn_extreme_changes=False,
    )
    outcome = annotations["preference"].map({1.0: 0.0, 1.5: 0.5, 2.0: 1.0}).to_numpy()
    ours = length_controlled_win_rate(
        outcome,
        annotations["output_2"].str.len().to_numpy(),
        annotations["output_1"].str.len().to_numpy(),
        annotations["index"].to_numpy(),
        rounds=200,
        seed=seed,
    )
    assert ours.win_rate.value * 100 == pytest.approx(theirs["win_rate"], abs=1e-9)
    # Percentage points: 3e-4 to 5e-4 apart (liblinear's tolerance) for the unpenalised GLM,
    # up to 0.05 for the shipped one, whose penalty pulls the length weight towards 0.
    assert ours.length_controlled.value * 100 == pytest.approx(
        theirs["length_controlled_winrate"], abs=2e-3
    )
    assert ours.length_controlled.value * 100 == pytest.approx(
        shipped["length_controlled_winrate"], abs=0.1
    )
    # The GLM's control moves the win rate: longer answers won more here.
    assert ours.length_controlled.value < ours.win_rate.value - 0.02
    assert ours.length_coefficient is not None and ours.length_coefficient.value > 0.3


def _battles(seed: int, n: int = 3000) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    models = np.array(["alpha", "beta", "gamma", "delta", "eps"])
    strength = np.array([0.6, 0.2, 0.0, -0.3, -0.5])
    ia = rng.integers(0, 5, n)
    ib = (ia + rng.integers(1, 5, n)) % 5
    first = rng.poisson([300, 2, 5, 3], size=(n, 4))
    second = rng.poisson([250, 1, 4, 2], size=(n, 4))
    feats = style_differences(first, second)
    z = (feats - feats.mean(axis=0)) / feats.std(axis=0)
    logit = strength[ia] - strength[ib] + z @ np.array([0.5, 0.1, 0.2, 0.0])
    u = rng.random(n)
    p = 1 / (1 + np.exp(-logit))
    winner = np.where(u < p, "model_a", "model_b")
    winner[rng.random(n) < 0.15] = "tie"
    frame = pd.DataFrame({"model_a": models[ia], "model_b": models[ib], "winner": winner})
    for j, name in enumerate(("tokens", "headers", "lists", "bold")):
        frame[name] = feats[:, j]
    return frame, feats


@pytest.mark.parametrize("seed", [0, 1])
def test_contextual_bradley_terry_matches_arena_rank(seed: int) -> None:
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset

    names = ("tokens", "headers", "lists", "bold")
    frame, feats = _battles(seed)
    dataset = ContextualPairDataset.from_pandas(
        frame, list(names), reweighted=False, normalize_features=True
    )
    model = ContextualBradleyTerry(dataset.n_competitors, len(names), reg=1e-4)
    theirs = model.compute_ratings_and_cis(dataset, ci_method="sandwich")
    outcome = frame["winner"].map({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}).to_numpy()
    ours = contextual_bradley_terry(
        frame["model_a"], frame["model_b"], outcome, feats, feature_names=names, reg=1e-4
    )
    assert list(ours.models) == list(theirs["competitors"])
    for i, name in enumerate(theirs["competitors"]):
        mine = ours.ratings[name]
        assert mine.value == pytest.approx(float(theirs["ratings"][i]), abs=0.05)
        assert mine.lower == pytest.approx(float(theirs["rating_lower"][i]), abs=0.05)
        assert mine.upper == pytest.approx(float(theirs["rating_upper"][i]), abs=0.05)
    for j, name in enumerate(names):
        assert ours.coefficients[name].value == pytest.approx(float(theirs["coeffs"][j]), abs=1e-4)
    # The simulated length effect is found, and it is the largest.
    tokens = ours.coefficients["tokens"]
    assert tokens.lower is not None and tokens.lower > 0.3
    assert tokens.value == max(c.value for c in ours.coefficients.values())
