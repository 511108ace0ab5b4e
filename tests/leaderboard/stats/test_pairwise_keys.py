"""Unit keys are numbered the same way whether they are dense integers, sparse ones or text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from leaderboard.stats.pairwise import pairwise_agreement_by_unit


def votes(keys: Sequence[object], seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    unit = rng.integers(0, len(keys), 400)
    return pd.DataFrame(
        {
            "key": [keys[u] for u in unit],
            "label": rng.choice(["A", "B", "tie"], unit.size),
            "rater": rng.integers(0, 30, unit.size),
        }
    )


def test_dense_sparse_and_text_keys_give_the_same_counts_in_key_order() -> None:
    dense = list(range(100, 140))
    sparse = [k * 10**9 for k in dense]
    text = [f"k{k}" for k in dense]  # sorts like the numbers: same width

    by_dense = pairwise_agreement_by_unit(votes(dense), votes(dense, seed=1))
    by_sparse = pairwise_agreement_by_unit(votes(sparse), votes(sparse, seed=1))
    by_text = pairwise_agreement_by_unit(votes(text), votes(text, seed=1))

    counts = ["agree_s1", "total_s1", "agree_s2", "total_s2"]
    assert by_dense[counts].equals(by_sparse[counts])
    assert by_dense[counts].equals(by_text[counts])
    assert by_sparse["key"].tolist() == [k * 10**9 for k in by_dense["key"].tolist()]
    assert by_text["key"].tolist() == [f"k{k}" for k in by_dense["key"].tolist()]
    assert by_dense["key"].is_monotonic_increasing
