"""MT-Bench's combination of a judge's two orders into one vote per pair.

Source: L. Zheng et al. (2023), "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", section
3.4 (swapping positions) and its GPT-4 pair judgments: a judge is asked with the answers in both
orders, and a verdict that changes with the order counts as a tie ("inconsistent").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from leaderboard.stats.majority import LABELS

if TYPE_CHECKING:
    import pandas as pd

# A judge call's order: A shown first, B shown first, or both answers judged at once.
CALL_ORDERS = ("ab", "ba", "both")


def judge_votes_combine(calls: pd.DataFrame) -> pd.DataFrame:
    """One vote per (run, pair) from a judge's calls, as MT-Bench combines both orders.

    A verdict given on both orders at once (`both`) is the vote. Otherwise the A-first and
    B-first verdicts agree and give the vote, or disagree and give a tie ("inconsistent", as in
    Zheng et al. 2023); a pair judged in one order only takes that verdict. The canonical Likert
    vote is the mean of the orders' canonical scores when both have one.
    """
    import pandas as pd

    if calls.empty:
        return pd.DataFrame(columns=["run_id", "pair_id", "label", "likert"])
    return judge_votes_combine_sorted(calls_sort(calls))


def judge_votes_combine_sorted(ordered: pd.DataFrame) -> pd.DataFrame:
    """:func:`judge_votes_combine` on calls, not none, already in :func:`calls_sort`'s order."""
    import pandas as pd

    run_ids = ordered["run_id"].to_numpy()
    pair_ids = ordered["pair_id"].to_numpy()
    # Groups are runs of equal (run, pair) in the sorted rows: reduced by their start offsets
    # rather than by a group-by on the keys.
    new_group = np.ones(len(ordered), dtype=bool)
    new_group[1:] = (run_ids[1:] != run_ids[:-1]) | (pair_ids[1:] != pair_ids[:-1])
    starts = np.flatnonzero(new_group)
    labels = pd.Categorical(ordered["label"], categories=LABELS)
    codes = labels.codes.astype(np.int64)
    agreed = np.minimum.reduceat(codes, starts) == np.maximum.reduceat(codes, starts)
    label = pd.Categorical.from_codes(
        np.where(agreed, codes[starts], LABELS.index("tie")), categories=pd.Index(LABELS)
    )
    # The mean of the scores present (NaN when none), as a group mean skips missing values.
    likert = ordered["likert"].to_numpy(dtype=np.float64)
    present = ~np.isnan(likert)
    total = np.add.reduceat(np.where(present, likert, 0.0), starts)
    count = np.add.reduceat(present.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / count, np.nan)
    return pd.DataFrame(
        {
            "run_id": run_ids[starts],
            "pair_id": pair_ids[starts],
            "label": label,
            "likert": mean,
        }
    )


def calls_sort(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls in (run, pair, order) order, ties in their given order (a stable sort); calls
    already in that order (as each part of the report's read is) are returned as they are."""
    import pandas as pd

    order_codes = pd.Categorical(calls["order"], categories=CALL_ORDERS).codes
    run, pair = calls["run_id"].to_numpy(), calls["pair_id"].to_numpy()
    if _in_order(run, pair, order_codes):
        return calls.reset_index(drop=True)
    # np.lexsort is stable and sorts by its last key first.
    index = np.lexsort((order_codes, pair, run))
    return calls.take(index).reset_index(drop=True)


def _in_order(*keys: npt.NDArray[Any]) -> bool:
    """Whether the rows are sorted by the keys, the first key first."""
    if len(keys[0]) < 2:
        return True
    before = np.zeros(len(keys[0]) - 1, dtype=bool)  # row i strictly before row i + 1
    tied = np.ones(len(keys[0]) - 1, dtype=bool)  # equal on the keys so far
    for key in keys:
        before |= tied & (key[1:] > key[:-1])
        tied &= key[1:] == key[:-1]
    return bool((before | tied).all())
