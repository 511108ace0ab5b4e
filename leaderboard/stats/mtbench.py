"""MT-Bench's rules: canonical pairwise judgment records, and one vote from a judge's two orders.

Source: L. Zheng et al. (2023), "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", and the
``lmsys/mt_bench_human_judgments`` data set. The records carry ``question_id``, ``turn``,
``model_a``, ``model_b``, ``winner`` and ``judge``; see shared/data/mt_bench_human_judgments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.stats.majority import LABELS

# A judge call's order: A shown first, B shown first, or both answers judged at once.
CALL_ORDERS = ("ab", "ba", "both")
VOTE_COLUMNS = ["key", "question_id", "turn", "model_1", "model_2", "label", "rater", "source"]


def judge_source(judge: str) -> str:
    """Name the kind of judge: "expert", "author" (the paper's authors) or the judge id itself."""
    if judge.startswith("expert_"):
        return "expert"
    if judge.startswith("author_"):
        return "author"
    return judge


def canonical_label(winner: str, *, swapped: bool) -> str:
    """Map an MT-Bench winner onto "A" (model_1), "B" (model_2) or "tie".

    Any label containing "tie" (``tie``, ``tie (inconsistent)``, ``tie (bothbad)``) is "tie", as in
    the paper's S1 definition. ``swapped`` says the record listed model_2 first, so the winner is
    flipped to canonical order.
    """
    if "tie" in winner:
        return "tie"
    if winner not in ("model_a", "model_b"):
        raise ValueError(f"unknown MT-Bench winner {winner!r}")
    first_won = winner == "model_a"
    return "B" if first_won == swapped else "A"


def canonicalize_votes(
    records: Iterable[Mapping[str, Any]], *, include_authors: bool = False
) -> pd.DataFrame:
    """Return MT-Bench records as canonical long-format votes.

    The unit key is ``(question_id, model_1, model_2, turn)`` with the model pair in sorted order
    (model_1 < model_2); ``label`` is "A" when model_1 won, "B" when model_2 won, "tie" for any tie
    label; ``rater`` is the judge id and ``source`` its kind (:func:`judge_source`). Author votes
    are left out unless ``include_authors`` (the paper's "human" means the experts only).
    Columns: key, question_id, turn, model_1, model_2, label, rater, source.
    """
    rows: list[dict[str, Any]] = []
    for record in records:
        source = judge_source(str(record["judge"]))
        if source == "author" and not include_authors:
            continue
        model_a, model_b = str(record["model_a"]), str(record["model_b"])
        swapped = model_b < model_a
        model_1, model_2 = (model_b, model_a) if swapped else (model_a, model_b)
        question_id, turn = int(record["question_id"]), int(record["turn"])
        rows.append(
            {
                "key": (question_id, model_1, model_2, turn),
                "question_id": question_id,
                "turn": turn,
                "model_1": model_1,
                "model_2": model_2,
                "label": canonical_label(str(record["winner"]), swapped=swapped),
                "rater": str(record["judge"]),
                "source": source,
            }
        )
    return pd.DataFrame(rows, columns=VOTE_COLUMNS)


def judge_votes_combine(calls: pd.DataFrame) -> pd.DataFrame:
    """One vote per (run, pair) from a judge's calls, as MT-Bench combines both orders.

    A verdict given on both orders at once (`both`) is the vote. Otherwise the A-first and
    B-first verdicts agree and give the vote, or disagree and give a tie ("inconsistent", as in
    Zheng et al. 2023); a pair judged in one order only takes that verdict. The canonical Likert
    vote is the mean of the orders' canonical scores when both have one.
    """
    if calls.empty:
        return pd.DataFrame(columns=["run_id", "pair_id", "label", "likert"])
    return judge_votes_combine_sorted(calls_sort(calls))


def judge_votes_combine_sorted(ordered: pd.DataFrame) -> pd.DataFrame:
    """:func:`judge_votes_combine` on calls, not none, already in :func:`calls_sort`'s order."""
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
        np.where(agreed, codes[starts], LABELS.index("tie")), categories=LABELS
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
