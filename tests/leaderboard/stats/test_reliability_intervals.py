"""Bootstrap intervals of Fleiss' kappa and Krippendorff's alpha, against resampling written out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.agreement import (
    Level,
    _alpha_of,
    _alphas_of,
    _distinct_rows,
    fleiss_kappa,
    fleiss_kappa_interval,
    krippendorff_alpha_from_long,
    krippendorff_alpha_interval,
)
from leaderboard.stats.bootstrap import cluster_sums


def crowd_table(seed: int, subjects: int, raters: int = 3) -> np.ndarray:
    """Subjects x (A, B, tie) counts of ``raters`` votes each, subjects leaning one way or not."""
    rng = np.random.default_rng(seed)
    lean = rng.dirichlet([1.0, 1.0, 0.5], subjects)
    return np.array([rng.multinomial(raters, p) for p in lean])


def test_fleiss_interval_holds_the_estimate_of_fleiss_kappa() -> None:
    table = crowd_table(0, 300)

    result = fleiss_kappa_interval(table, rounds=500, seed=1)

    assert result.estimate == fleiss_kappa(table)
    assert result.lower < result.estimate < result.upper
    assert (result.rounds, result.seed, result.clusters) == (500, 1, 300)


def test_fleiss_interval_matches_resampling_subjects_one_by_one_in_distribution() -> None:
    table = crowd_table(1, 200)
    draws = np.random.default_rng(7).integers(0, 200, size=(3000, 200))
    kappas = [fleiss_kappa(table[row]) for row in draws]

    result = fleiss_kappa_interval(table, rounds=3000, seed=2)

    expected = np.quantile(kappas, [0.025, 0.975])
    assert result.lower == pytest.approx(expected[0], abs=0.01)
    assert result.upper == pytest.approx(expected[1], abs=0.01)


def test_fleiss_interval_over_prompts_draws_whole_prompts() -> None:
    # Prompts whose subjects all lean the same way: drawing prompts sees that they move together.
    rng = np.random.default_rng(3)
    prompt = np.repeat(np.arange(40), 6)
    lean = rng.dirichlet([1.0, 1.0, 0.5], 40)[prompt]
    table = np.array([rng.multinomial(3, p) for p in lean])
    members = [np.flatnonzero(prompt == p) for p in range(40)]
    draws = np.random.default_rng(5).integers(0, 40, size=(3000, 40))
    kappas = [fleiss_kappa(table[np.concatenate([members[p] for p in row])]) for row in draws]

    result = fleiss_kappa_interval(table, prompt, rounds=3000, seed=4)

    expected = np.quantile(kappas, [0.025, 0.975])
    assert result.clusters == 40
    assert result.lower == pytest.approx(expected[0], abs=0.015)
    assert result.upper == pytest.approx(expected[1], abs=0.015)


def test_fleiss_interval_is_nan_when_kappa_is_undefined() -> None:
    result = fleiss_kappa_interval([[3, 0, 0], [3, 0, 0]], rounds=10)

    assert math.isnan(result.estimate) and math.isnan(result.lower) and math.isnan(result.upper)


def sparse_ratings(seed: int, units: int) -> pd.DataFrame:
    """Long-format ratings: 1 to 4 raters a unit, Likert 1-8 near a unit's own level."""
    rng = np.random.default_rng(seed)
    rows = []
    for unit in range(units):
        level = rng.integers(1, 9)
        for _ in range(int(rng.integers(1, 5))):
            rows.append((unit, int(np.clip(level + rng.integers(-2, 3), 1, 8)), unit // 5))
    return pd.DataFrame(rows, columns=["unit", "value", "prompt"])


def alphas_resampling(
    ratings: pd.DataFrame, group: str, level: Level, rounds: int, seed: int
) -> np.ndarray:
    """Alpha of each round, drawing the groups (units or prompts) with replacement and
    numbering every drawn copy of a unit as a unit of its own."""
    members = [np.flatnonzero(ratings[group].to_numpy() == g) for g in np.unique(ratings[group])]
    units, values = ratings["unit"].to_numpy(), ratings["value"].to_numpy()
    draws = np.random.default_rng(seed).integers(0, len(members), size=(rounds, len(members)))
    out = []
    for row in draws:
        picked = np.concatenate([members[i] for i in row])
        copy = np.repeat(np.arange(len(row)), [len(members[i]) for i in row])
        out.append(
            krippendorff_alpha_from_long(copy * 10_000 + units[picked], values[picked], level)
        )
    return np.array(out)


@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_alpha_interval_matches_resampling_units_one_by_one_in_distribution(level: Level) -> None:
    ratings = sparse_ratings(0, 150)
    alphas = alphas_resampling(ratings, "unit", level, rounds=1000, seed=9)

    result = krippendorff_alpha_interval(ratings["unit"], ratings["value"], level, rounds=1000)

    # Units with a single rating are not pairable and never count, so drawing all units or the
    # pairable ones gives the same distribution of alpha.
    expected = np.nanquantile(alphas, [0.025, 0.975])
    assert result.estimate == krippendorff_alpha_from_long(ratings["unit"], ratings["value"], level)
    assert result.lower == pytest.approx(expected[0], abs=0.025)
    assert result.upper == pytest.approx(expected[1], abs=0.025)


def test_alpha_interval_over_prompts_draws_each_prompts_units_together() -> None:
    ratings = sparse_ratings(1, 150)
    alphas = alphas_resampling(ratings, "prompt", "ordinal", rounds=1000, seed=3)

    result = krippendorff_alpha_interval(
        ratings["unit"], ratings["value"], "ordinal", ratings["prompt"], rounds=1000, seed=6
    )

    expected = np.quantile(alphas, [0.025, 0.975])
    assert result.clusters == ratings["prompt"].nunique()
    assert result.lower == pytest.approx(expected[0], abs=0.025)
    assert result.upper == pytest.approx(expected[1], abs=0.025)


def test_alpha_interval_is_seeded_and_rejects_a_unit_split_between_prompts() -> None:
    ratings = sparse_ratings(2, 80)

    first = krippendorff_alpha_interval(ratings["unit"], ratings["value"], "nominal", seed=3)
    again = krippendorff_alpha_interval(ratings["unit"], ratings["value"], "nominal", seed=3)
    other = krippendorff_alpha_interval(ratings["unit"], ratings["value"], "nominal", seed=4)

    assert first == again and first != other
    with pytest.raises(ValueError, match="same cluster"):
        krippendorff_alpha_interval([1, 1, 2, 2], ["A", "A", "B", "A"], "nominal", [0, 1, 2, 2])


def test_alpha_interval_of_unpairable_ratings_is_nan() -> None:
    result = krippendorff_alpha_interval([1, 2, 3], ["A", "B", "A"], "nominal", rounds=5)

    assert math.isnan(result.estimate) and math.isnan(result.lower) and result.clusters == 0


def test_cluster_sums_draw_c_clusters_with_replacement() -> None:
    # The first column counts the clusters drawn; equal rows (the second and third) are merged.
    rows = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 2.0, 2.0]])

    sums = cluster_sums(rows, rounds=4000, seed=0)

    assert sums.shape == (4000, 3)
    assert (sums[:, 0] == 4).all()
    # On average the column sums of the matrix; the draws vary from round to round.
    assert sums[:, 1:].mean(axis=0) == pytest.approx(rows[:, 1:].sum(axis=0), abs=0.1)
    assert sums[:, 1].std() > 0.5


def test_cluster_sums_of_few_distinct_rows_draw_by_counts() -> None:
    # 300 clusters of two kinds of row: drawn as counts per distinct row, same distribution.
    rows = np.array([[1.0, 1.0]] * 100 + [[1.0, 0.0]] * 200)

    sums = cluster_sums(rows, rounds=4000, seed=1)

    assert (sums[:, 0] == 300).all()
    # The first kind is picked Binomial(300, 1/3) times: mean 100, sd sqrt(300 * 2/9) = 8.2.
    assert sums[:, 1].mean() == pytest.approx(100, abs=0.6)
    assert sums[:, 1].std() == pytest.approx(math.sqrt(300 * 2 / 9), rel=0.05)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alphas_of_a_stack_equal_alpha_of_each_matrix(level: Level) -> None:
    # The interval computes every round's alpha at once; each must be the one-matrix alpha.
    rng = np.random.default_rng(3)
    domain = np.array([1.0, 2.0, 4.0, 5.0, 8.0])
    stack = rng.integers(0, 6, size=(50, 5, 5)).astype(np.float64)
    stack = stack + stack.transpose(0, 2, 1)  # coincidence matrices are symmetric
    stack[7] = 0.0
    stack[7, 2, 2] = 4.0  # one value only: D_e = 0, alpha undefined

    got = _alphas_of(stack, domain, level)

    expected = [_alpha_of(matrix, domain, level) for matrix in stack]
    assert np.isnan(got[7]) and math.isnan(expected[7])
    assert np.delete(got, 7) == pytest.approx(np.delete(expected, 7), rel=1e-12)


def test_distinct_rows_are_numpy_unique_rows() -> None:
    # Count rows read as numbers (fast) give the rows and inverse numpy.unique gives.
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 4, size=(2000, 8)).astype(np.float64)

    distinct, row_of_unit = _distinct_rows(counts)

    expected, inverse = np.unique(counts, axis=0, return_inverse=True)
    assert (distinct == expected).all()
    assert (row_of_unit == inverse.reshape(-1)).all()
    assert (distinct[row_of_unit] == counts).all()


def test_cluster_sums_of_distinct_rows_draw_cluster_indices() -> None:
    # 300 different rows: drawn as 300 cluster indices a round; the sum of the second column
    # then has mean 300 * mean(x) and variance 300 * var(x) (x = 0..299, population variance).
    x = np.arange(300, dtype=np.float64)
    rows = np.column_stack([np.ones(300), x])

    sums = cluster_sums(rows, rounds=4000, seed=2)

    assert (sums[:, 0] == 300).all()
    assert sums[:, 1].mean() == pytest.approx(300 * x.mean(), rel=0.002)
    assert sums[:, 1].std() == pytest.approx(math.sqrt(300 * x.var()), rel=0.05)


@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_interval_estimates_are_the_point_statistics(level: Level) -> None:
    # The report takes the estimates from the intervals: they must be the statistics themselves.
    rng = np.random.default_rng(5)
    units = rng.integers(0, 80, 400)
    values = rng.integers(1, 9, 400).astype(float)
    clusters = units // 8
    table = crowd_table(6, 60)

    alpha = krippendorff_alpha_interval(units, values, level, clusters, rounds=20)
    kappa = fleiss_kappa_interval(table, rounds=20)

    assert alpha.estimate == krippendorff_alpha_from_long(units, values, level)
    assert kappa.estimate == fleiss_kappa(table)


def test_cluster_sums_by_index_sum_the_rows_of_the_documented_draws() -> None:
    # Round r sums the rows at the C indices that rng.integers(0, C, int32) draws for it.
    rng = np.random.default_rng(5)
    rows = np.column_stack([np.ones(300), rng.normal(size=(300, 3))])

    sums = cluster_sums(rows, rounds=50, seed=9)

    picks = np.random.default_rng(9).integers(0, 300, size=(50, 300), dtype=np.int32)
    assert sums == pytest.approx(np.stack([rows[p].sum(axis=0) for p in picks]), rel=1e-12)
