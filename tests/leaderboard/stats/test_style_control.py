"""The style-controlled rankings on hand-made data with known answers and against independent
computations (a full refit bootstrap, statsmodels' cluster-robust GLM, the plain Bradley-Terry
fit); the audits against alpaca_eval and arena-rank are in test_style_control_audit.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.special import expit

from leaderboard.stats.bradley_terry import bradley_terry
from leaderboard.stats.style_control import (
    _logistic_fit,
    contextual_bradley_terry,
    length_controlled_win_rate,
    style_differences,
)


def test_style_differences_are_normalised_and_zero_when_both_answers_lack_the_feature() -> None:
    got = style_differences([[30, 0, 2, 1]], [[10, 0, 0, 3]])
    assert got.tolist() == [[0.5, 0.0, 1.0, -0.5]]


def test_equal_lengths_leave_the_win_rate_as_it_is() -> None:
    outcome = np.array([1, 1, 1, 0, 0.5, 1, 0, 1])
    got = length_controlled_win_rate(outcome, np.full(8, 100), np.full(8, 100), np.arange(8))
    assert got.length_coefficient is None
    assert got.win_rate.value == pytest.approx(0.6875)
    assert got.length_controlled.value == pytest.approx(0.6875, abs=1e-6)
    assert got.win_rate.lower is not None and got.win_rate.upper is not None
    assert got.win_rate.lower < 0.6875 < got.win_rate.upper


def _votes(seed: int, prompts: int = 150, per_prompt: int = 3) -> dict[str, np.ndarray]:
    """A model that wins more when its answer is longer; votes clustered by prompt (a prompt
    effect shared by its votes)."""
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(prompts), per_prompt)
    base = rng.integers(100, 600, prompts)[cluster]
    model = base + rng.normal(100, 200, cluster.size)
    effect = rng.normal(0, 0.8, prompts)[cluster]
    diff = (model - base) / np.std(model - base, ddof=1)
    p = expit(0.2 + 1.0 * np.tanh(diff) + effect)
    outcome = (rng.random(cluster.size) < p).astype(float)
    return {"outcome": outcome, "model": model, "base": base, "cluster": cluster}


def test_length_control_removes_a_length_preference() -> None:
    v = _votes(0, prompts=2000, per_prompt=1)
    got = length_controlled_win_rate(v["outcome"], v["model"], v["base"], v["cluster"], rounds=200)
    # Longer answers won: the raw rate is above the rate at equal length, sigmoid(0.2) = 0.55.
    assert got.win_rate.value > 0.6
    assert got.length_controlled.value == pytest.approx(expit(0.2), abs=0.035)
    assert got.length_coefficient is not None
    assert got.length_coefficient.lower is not None and got.length_coefficient.lower > 0.6


def test_one_step_bootstrap_matches_a_full_refit_over_prompts() -> None:
    v = _votes(1)
    got = length_controlled_win_rate(
        v["outcome"], v["model"], v["base"], v["cluster"], rounds=400, seed=3
    )
    # Independent: draw prompts with replacement and refit the GLM each round.
    rng = np.random.default_rng(11)
    diff = v["model"] - v["base"]
    x = np.tanh(diff / np.std(diff, ddof=1))
    design = np.column_stack([np.ones_like(x), x])
    prompts = np.unique(v["cluster"])
    lc = []
    for _ in range(400):
        drawn = rng.choice(prompts, prompts.size)
        weight = np.bincount(drawn, minlength=prompts.size)[v["cluster"]].astype(float)
        beta = _logistic_fit(design, v["outcome"], weight, np.full(2, 1e-6))
        lc.append(expit(beta[0]))
    lower, upper = np.quantile(lc, [0.025, 0.975])
    assert got.length_controlled.lower == pytest.approx(lower, abs=0.02)
    assert got.length_controlled.upper == pytest.approx(upper, abs=0.02)
    # Prompt clusters matter: the interval over prompts is wider than a binomial one would be.
    assert got.length_controlled.upper is not None and got.length_controlled.lower is not None
    width = got.length_controlled.upper - got.length_controlled.lower
    naive = 2 * 1.96 * np.sqrt(0.25 / v["outcome"].size)
    assert width > 1.1 * naive


def test_without_style_features_the_fit_is_plain_bradley_terry() -> None:
    rng = np.random.default_rng(4)
    models = np.array(["a", "b", "c", "d"])
    ia = rng.integers(0, 4, 800)
    ib = (ia + rng.integers(1, 4, 800)) % 4
    strength = np.array([0.8, 0.3, 0.0, -0.4])
    p = expit(strength[ia] - strength[ib])
    u = rng.random(800)
    winner = np.where(u < p, "model_a", "model_b")
    winner[rng.random(800) < 0.1] = "tie"
    outcome = pd.Series(winner).map({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}).to_numpy()
    got = contextual_bradley_terry(
        models[ia], models[ib], outcome, np.zeros((800, 0)), feature_names=()
    )
    plain = bradley_terry(
        pd.DataFrame({"model_a": models[ia], "model_b": models[ib], "winner": winner})
    ).set_index("model")["rating"]
    for model in models:
        assert got.ratings[model].value == pytest.approx(plain[model], abs=0.1)
    assert got.coefficients == {}


def test_style_intervals_over_prompts_match_statsmodels_cluster_robust_glm() -> None:
    rng = np.random.default_rng(5)
    n, prompts = 1500, 250
    cluster = rng.integers(0, prompts, n)
    models = np.array(["a", "b", "c"])
    ia = rng.integers(0, 3, n)
    ib = (ia + rng.integers(1, 3, n)) % 3
    # Features shared within a prompt, so clustering widens their intervals.
    feats = style_differences(
        rng.poisson(200, (prompts, 2))[cluster] + rng.poisson(20, (n, 2)),
        rng.poisson(200, (prompts, 2))[cluster],
    )
    z = (feats - feats.mean(axis=0)) / feats.std(axis=0)
    p = expit(np.array([0.4, 0.0, -0.4])[ia] - np.array([0.4, 0.0, -0.4])[ib] + 0.6 * z[:, 0])
    outcome = (rng.random(n) < p).astype(float)
    got = contextual_bradley_terry(
        models[ia],
        models[ib],
        outcome,
        feats,
        feature_names=("tokens", "bold"),
        clusters=cluster,
        reg=1e-9,
        ridge_ratings=1e-9,
    )
    # Independent: a binomial GLM with model "c" as the reference and statsmodels'
    # cluster-robust covariance without its small-sample factor.
    design = np.zeros((n, 4))
    for j in range(2):
        design[:, j] = (ia == j).astype(float) - (ib == j).astype(float)
    design[:, 2:] = z
    fit = sm.GLM(outcome, design, family=sm.families.Binomial()).fit(
        cov_type="cluster", cov_kwds={"groups": cluster, "use_correction": False}
    )
    for j, name in enumerate(("tokens", "bold")):
        mine = got.coefficients[name]
        assert mine.value == pytest.approx(fit.params[2 + j], abs=1e-5)
        assert mine.upper is not None and mine.lower is not None
        half = (mine.upper - mine.lower) / 2
        assert half == pytest.approx(1.959964 * fit.bse[2 + j], rel=1e-3)
    # The rating gap a - c is the GLM's coefficient of a, on the Elo scale.
    gap = got.ratings["a"].value - got.ratings["c"].value
    assert gap == pytest.approx(fit.params[0] * 400 / np.log(10), abs=1e-3)


def test_a_feature_equal_on_every_battle_has_no_coefficient_and_changes_nothing() -> None:
    rng = np.random.default_rng(6)
    ia = rng.integers(0, 3, 300)
    ib = (ia + rng.integers(1, 3, 300)) % 3
    outcome = (rng.random(300) < 0.5).astype(float)
    varying = rng.normal(size=(300, 1))
    both = np.column_stack([varying, np.full(300, 0.25)])
    got = contextual_bradley_terry(
        ia, ib, outcome, both, feature_names=("tokens", "bold"), models=["a", "b", "c"]
    )
    alone = contextual_bradley_terry(
        ia, ib, outcome, varying, feature_names=("tokens",), models=["a", "b", "c"]
    )
    assert np.isnan(got.coefficients["bold"].value) and got.coefficients["bold"].lower is None
    assert got.coefficients["tokens"].value == pytest.approx(alone.coefficients["tokens"].value)
    for model in ("a", "b", "c"):
        assert got.ratings[model].value == pytest.approx(alone.ratings[model].value)
