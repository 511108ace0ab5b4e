import math
from itertools import permutations

import krippendorff
import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.agreement import Level, krippendorff_alpha, krippendorff_alpha_from_long

N = None
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 coders x 12 units.
RELIABILITY_DATA = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]
PUBLISHED: dict[Level, float] = {
    "nominal": 0.743,
    "ordinal": 0.815,
    "interval": 0.849,
    "ratio": 0.797,
}


def alpha_from_coincidences(data: list[list[int | None]], level: Level) -> float:
    """Krippendorff 2011 by hand: coincidence matrix from ordered pairs of coders per unit."""
    values = sorted({v for row in data for v in row if v is not None})
    index = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for unit in range(len(data[0])):
        coded = [v for row in data if (v := row[unit]) is not None]
        if len(coded) < 2:
            continue
        for c, k in permutations(coded, 2):
            o[index[c]][index[k]] += 1.0 / (len(coded) - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()

    def delta(i: int, j: int) -> float:
        c, k = values[i], values[j]
        if level == "nominal":
            return float(c != k)
        if level == "interval":
            return float((c - k) ** 2)
        if level == "ratio":
            return float(((c - k) / (c + k)) ** 2)
        lo, hi = min(i, j), max(i, j)
        return float((n_c[lo : hi + 1].sum() - (n_c[i] + n_c[j]) / 2) ** 2)

    size = len(values)
    observed = sum(o[i, j] * delta(i, j) for i in range(size) for j in range(size))
    expected = sum(n_c[i] * n_c[j] * delta(i, j) for i in range(size) for j in range(size))
    return 1.0 - (n - 1) * observed / expected


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_krippendorff_2011_worked_example(level: Level) -> None:
    alpha = krippendorff_alpha(RELIABILITY_DATA, level)

    assert round(alpha, 3) == PUBLISHED[level]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_equals_a_hand_built_coincidence_matrix_and_the_package(
    level: Level,
) -> None:
    dense = np.array(RELIABILITY_DATA, dtype=float)

    alpha = krippendorff_alpha(RELIABILITY_DATA, level)

    assert alpha == pytest.approx(alpha_from_coincidences(RELIABILITY_DATA, level), abs=1e-12)
    assert alpha == pytest.approx(
        krippendorff.alpha(reliability_data=dense, level_of_measurement=level), abs=1e-12
    )


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha_from_long_format_equals_the_table_form(level: Level) -> None:
    units = [u for row in RELIABILITY_DATA for u, v in enumerate(row) if v is not None]
    values = [v for row in RELIABILITY_DATA for v in row if v is not None]
    # Unit ids may be any hashable, e.g. the Django side's primary keys.
    unit_ids = [f"pair-{u}" for u in units]

    alpha = krippendorff_alpha_from_long(unit_ids, values, level)

    assert alpha == pytest.approx(krippendorff_alpha(RELIABILITY_DATA, level), abs=1e-12)


def test_krippendorff_alpha_nominal_accepts_string_labels() -> None:
    labels = {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
    as_text = [[None if v is None else labels[v] for v in row] for row in RELIABILITY_DATA]

    assert round(krippendorff_alpha(as_text, "nominal"), 3) == 0.743


def test_krippendorff_alpha_handles_sparse_crowd_data_in_long_format() -> None:
    rng = np.random.default_rng(7)
    n_units, per_unit = 20_000, 3
    truth = rng.integers(1, 9, n_units)
    units = np.repeat(np.arange(n_units), per_unit)
    noise = rng.integers(-1, 2, units.size)
    values = np.clip(truth[units] + noise, 1, 8)
    # Thousands of raters each with a handful of units: never a raters x units table.
    alpha = krippendorff_alpha_from_long(units, values, "interval")

    counts = np.zeros((n_units, 8), dtype=int)
    np.add.at(counts, (units, values - 1), 1)
    expected = krippendorff.alpha(
        value_counts=counts, value_domain=np.arange(1, 9), level_of_measurement="interval"
    )
    assert alpha == pytest.approx(expected, abs=1e-12)
    assert 0.8 < alpha < 1.0


@pytest.mark.parametrize(
    "data",
    [
        pytest.param([[1, 2, 3, 4]], id="single rater"),
        pytest.param([[1, N, 3, N], [N, 2, N, 4]], id="no unit coded twice"),
        pytest.param([[N, N], [N, N]], id="nothing coded"),
        pytest.param([[3, 3, 3], [3, 3, N]], id="all identical values"),
    ],
)
def test_krippendorff_alpha_is_nan_when_undefined(data: list[list[int | None]]) -> None:
    assert math.isnan(krippendorff_alpha(data, "nominal"))
    assert math.isnan(krippendorff_alpha(data, "interval"))


def test_krippendorff_alpha_is_one_for_perfect_agreement_with_variation() -> None:
    assert krippendorff_alpha([[1, 2, 3], [1, 2, 3]], "ordinal") == pytest.approx(1.0)


def test_krippendorff_alpha_rejects_an_unknown_level() -> None:
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(RELIABILITY_DATA, "cardinal")  # type: ignore[arg-type]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("seed", [0, 1])
def test_alpha_from_long_equals_the_package_on_uneven_sparse_data(level: Level, seed: int) -> None:
    # Units with 1 to 5 ratings (single ones are not pairable), values 1-8 with some unused.
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, 3000)
    units = np.repeat(np.arange(sizes.size), sizes)
    values = np.clip(rng.integers(1, 9, sizes.size)[units] + rng.integers(-2, 3, units.size), 2, 8)

    alpha = krippendorff_alpha_from_long(units, values, level)

    counts = np.zeros((sizes.size, 9), dtype=int)
    np.add.at(counts, (units, values), 1)
    pairable = counts[counts.sum(axis=1) >= 2][:, 2:]
    expected = krippendorff.alpha(
        value_counts=pairable, value_domain=np.arange(2, 9), level_of_measurement=level
    )
    assert alpha == pytest.approx(expected, abs=1e-12)


def test_alpha_from_long_reads_a_categorical_by_its_codes_with_missing_values() -> None:
    labels = ["A", "B", "tie", None, "A", "A", "tie", "B", "B", None]
    units = [1, 1, 2, 2, 2, 3, 3, 4, 4, 4]
    categorical = pd.Series(pd.Categorical(labels, categories=["A", "B", "tie"]))

    assert krippendorff_alpha_from_long(units, categorical, "nominal") == pytest.approx(
        krippendorff_alpha_from_long(units, labels, "nominal"), abs=1e-15
    )


@pytest.mark.parametrize("empty", [[], [[]], np.zeros((0, 3))])
def test_alpha_of_an_empty_table_is_nan_as_documented(empty: object) -> None:
    assert math.isnan(krippendorff_alpha(empty, "nominal"))  # type: ignore[arg-type]
