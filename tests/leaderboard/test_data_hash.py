"""The data hash a report records changes with any value of its rows, and only with them."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
import pytest

from leaderboard.selectors.snapshots import frame_hash_update


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pair_id": np.array([3, 1, 2], dtype=np.int64),
            "likert": [7.0, np.nan, 2.0],
            "is_gold": [True, False, False],
            "label": pd.Categorical(["A", "tie", "B"], categories=["A", "B", "tie"]),
            "a_left": pd.Series([True, None, False], dtype=object),
            "values": pd.Series([["honesty"], [], ["helpfulness", "honesty"]], dtype=object),
        }
    )


def digest_of(data: pd.DataFrame, name: str = "human") -> str:
    digest = hashlib.sha256()
    frame_hash_update(digest, name, data)
    return digest.hexdigest()


def test_equal_frames_give_equal_hashes_whatever_the_nan_payload() -> None:
    other = frame()
    # A NaN with another bit pattern is still a missing score.
    other.loc[1, "likert"] = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
    assert digest_of(frame()) == digest_of(other)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("pair_id", 4),
        ("likert", 3.0),
        ("is_gold", False),
        ("label", "B"),
        ("a_left", False),
        ("values", ["honesty", "helpfulness"]),
    ],
)
def test_changing_one_value_changes_the_hash(column: str, value: Any) -> None:
    changed = frame()
    changed.at[0, column] = value
    assert digest_of(changed) != digest_of(frame())


def test_rows_order_names_and_category_lists_count() -> None:
    base = digest_of(frame())
    assert digest_of(frame().iloc[::-1].reset_index(drop=True)) != base
    assert digest_of(frame(), "calls") != base
    assert digest_of(frame().rename(columns={"likert": "score"})) != base
    # Same labels, other category list: the codes mean other values.
    relisted = frame()
    relisted["label"] = relisted["label"].cat.set_categories(["A", "B", "tie", "other"])
    assert digest_of(relisted) != base
    # A missing score is not a score of zero, nor the text "nan".
    zero = frame()
    zero.loc[1, "likert"] = 0.0
    assert digest_of(zero) != base
