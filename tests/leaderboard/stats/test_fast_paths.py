"""The fast paths of the statistics give the numbers of the straightforward computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.stats.pairwise import bootstrap_agreement_ci


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
