import math

import numpy as np
import pytest
from scipy import stats

from leaderboard.stats.correlation import (
    _weighted_midranks,
    _weighted_pearson,
    correlation,
    correlation_over_clusters,
)


@pytest.fixture
def sample() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    return x, 0.6 * x + rng.normal(size=60)


def test_pearson_interval_is_fishers_z_interval(sample: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = sample

    result = correlation(x, y, "pearson")

    r = stats.pearsonr(x, y)[0]
    half = 1.959963984540054 / math.sqrt(60 - 3)
    assert result.estimate == pytest.approx(r)
    assert result.lower == pytest.approx(math.tanh(math.atanh(r) - half))
    assert result.upper == pytest.approx(math.tanh(math.atanh(r) + half))
    assert result.n == 60


@pytest.mark.parametrize(
    ("method", "scipy_function", "variance"),
    [
        ("spearman", stats.spearmanr, 1.06 / (60 - 3)),
        ("kendall", stats.kendalltau, 0.437 / (60 - 4)),
    ],
)
def test_rank_correlations_use_the_fieller_hartley_pearson_variances(
    sample: tuple[np.ndarray, np.ndarray], method: str, scipy_function: object, variance: float
) -> None:
    x, y = sample

    result = correlation(x, y, method)  # type: ignore[arg-type]

    estimate = scipy_function(x, y)[0]  # type: ignore[operator]
    half = 1.959963984540054 * math.sqrt(variance)
    assert result.estimate == pytest.approx(estimate)
    assert result.lower == pytest.approx(math.tanh(math.atanh(estimate) - half))
    assert result.upper == pytest.approx(math.tanh(math.atanh(estimate) + half))


def test_pairs_with_a_missing_value_are_left_out_and_counted() -> None:
    x = [1.0, 2.0, 3.0, 4.0, np.nan, 6.0]
    y = [2.0, 1.0, 4.0, 3.0, 5.0, np.nan]

    result = correlation(x, y, "spearman")

    assert result.n == 4
    assert result.estimate == pytest.approx(stats.spearmanr([1, 2, 3, 4], [2, 1, 4, 3])[0])


@pytest.mark.parametrize(
    ("x", "y"),
    [
        pytest.param([1.0, 2.0], [1.0, 2.0], id="two pairs"),
        pytest.param([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0], id="constant variable"),
    ],
)
def test_correlation_is_nan_when_undefined(x: list[float], y: list[float]) -> None:
    result = correlation(x, y, "pearson")

    assert math.isnan(result.estimate) and math.isnan(result.lower)


def test_a_perfect_correlation_has_a_degenerate_interval_at_one() -> None:
    result = correlation([1, 2, 3, 4, 5], [2, 4, 6, 8, 10], "kendall")

    assert (result.estimate, result.lower, result.upper) == (1.0, 1.0, 1.0)


def test_a_prompt_bootstrap_rounds_coefficient_is_scipys_on_the_repeated_sample() -> None:
    rng = np.random.default_rng(8)
    x = rng.integers(1, 5, 30).astype(float)  # heavily tied, as mean Likert scores are
    y = (x + rng.integers(-1, 2, 30)).astype(float)
    weights = rng.integers(0, 3, (5, 30)).astype(float)
    pearson = _weighted_pearson(x, y, weights)
    spearman = _weighted_pearson(
        _weighted_midranks(x, weights), _weighted_midranks(y, weights), weights
    )
    for row in range(5):
        copies = weights[row].astype(int)
        xr, yr = np.repeat(x, copies), np.repeat(y, copies)
        assert pearson[row] == pytest.approx(stats.pearsonr(xr, yr).statistic, abs=1e-12)
        assert spearman[row] == pytest.approx(stats.spearmanr(xr, yr).statistic, abs=1e-12)


def test_the_interval_over_prompts_widens_when_prompts_differ() -> None:
    rng = np.random.default_rng(9)
    prompts = np.repeat(np.arange(12), 8)
    # Each prompt shifts both scores alike: units of one prompt move together.
    shift = rng.normal(scale=2.0, size=12)[prompts]
    x = np.round(shift + rng.normal(size=prompts.size))
    y = np.round(shift + rng.normal(size=prompts.size))
    for method in ("pearson", "spearman"):
        over = correlation_over_clusters(x, y, prompts, method, rounds=2000, seed=1)
        units = correlation_over_clusters(
            x, y, np.arange(prompts.size), method, rounds=2000, seed=1
        )
        assert over.estimate == correlation(x, y, method).estimate
        assert over.interval == "prompt bootstrap"
        assert over.lower < over.estimate < over.upper
        assert (over.upper - over.lower) > 1.3 * (units.upper - units.lower)


def test_one_prompt_gives_no_interval_and_says_so() -> None:
    got = correlation_over_clusters(
        [1, 2, 3, 4], [1, 3, 2, 4], [5, 5, 5, 5], "spearman", rounds=10, seed=0
    )
    assert math.isnan(got.lower) and got.interval == "too few prompts for an interval"
