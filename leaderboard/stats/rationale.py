"""Distribution of the seven values people cite for the better answer (AdvisorQA rationale form)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from core.conventions import SEVEN_VALUE_KEYS

if TYPE_CHECKING:
    import pandas as pd


def rationale_distribution(selections: Iterable[Iterable[str]]) -> pd.DataFrame:
    """Return, for each of the seven values, how many judgments selected it and their share.

    ``selections`` holds one multi-select answer per judgment (a value may be picked once per
    judgment; repeats are counted once). Formula: ``count_v = #judgments selecting v``,
    ``share_v = count_v / #judgments`` (shares need not sum to 1, the form is multi-select;
    ``share_of_mentions_v = count_v / sum_v count_v`` does). Source: the AdvisorQA rationale
    form. Rows follow :data:`core.conventions.SEVEN_VALUE_KEYS` (AdvisorQA's order); no judgments
    gives NaN shares. An unknown value raises ValueError.
    """
    import pandas as pd

    counts = dict.fromkeys(SEVEN_VALUE_KEYS, 0)
    judgments = 0
    for selection in selections:
        judgments += 1
        for value in set(selection):
            if value not in counts:
                raise ValueError(f"unknown rationale value {value!r}")
            counts[value] += 1
    count = pd.Series(counts, dtype="int64")
    mentions = int(count.sum())
    return pd.DataFrame(
        {
            "value": list(SEVEN_VALUE_KEYS),
            "count": count.to_numpy(),
            "share": count.to_numpy() / judgments if judgments else float("nan"),
            "share_of_mentions": count.to_numpy() / mentions if mentions else float("nan"),
        }
    )
