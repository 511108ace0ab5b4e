"""Canonicalisation of the MT-Bench human and GPT-4 pairwise judgment records.

Source: L. Zheng et al. (2023), "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", and the
``lmsys/mt_bench_human_judgments`` data set. The records carry ``question_id``, ``turn``,
``model_a``, ``model_b``, ``winner`` and ``judge``; see shared/data/mt_bench_human_judgments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

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
