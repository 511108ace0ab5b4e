"""The drill-down: the agreement units behind a report cell, and one unit with all its votes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from annotation.models import HumanJudgment, Pair, Study
from judges.models import JudgeCall
from leaderboard.selectors.frames import StudyVotes
from leaderboard.selectors.ratings import RATING_COLUMNS, judgments_with_ratings
from leaderboard.stats.majority import LABELS, people_majority


@dataclass(frozen=True)
class UnitRow:
    """One agreement unit in a drill-down list: the people's votes and each judge's vote."""

    pair_id: int
    prompt: str
    category: str
    turn: int
    system_a: str
    system_b: str
    human_a: int
    human_b: int
    human_tie: int
    majority: str
    judges: dict[str, str]


def unit_rows_get(
    *,
    votes: StudyVotes,
    judge: str | None = None,
    disagree: bool = False,
    only: set[int] | None = None,
) -> list[UnitRow]:
    """The units behind a report cell: every unit with votes, or with `judge` and `disagree`,
    those where that judge's vote differs from the people's majority label
    (:func:`leaderboard.stats.majority.people_majority`: a tied count is a tie); with `only`,
    those of these pair ids (the units behind a per-answer rating)."""
    human = votes.human
    counts = (
        human.groupby(["pair_id", "label"], observed=False).size().unstack("label", fill_value=0)
    )
    counts = counts.reindex(columns=list(LABELS), fill_value=0)
    majority = people_majority(human)
    judge_votes = {
        source: votes.judges[votes.judges["source"] == source].set_index("pair_id")["label"]
        for source in sorted(set(votes.judges["source"].tolist()))
    }
    units = votes.pairs.set_index("pair_id")
    wanted = units.index.intersection(
        counts.index.union(pd.Index(votes.judges["pair_id"].unique()))
    )
    if only is not None:
        wanted = wanted[wanted.isin(list(only))]
    if judge is not None:
        if judge not in judge_votes:
            return []
        wanted = wanted.intersection(judge_votes[judge].index)
        if disagree:
            mine = judge_votes[judge].reindex(wanted)
            theirs = majority.reindex(wanted)
            wanted = wanted[(theirs.notna() & (mine != theirs)).to_numpy()]
    rows = []
    for pair_id in sorted(wanted):
        unit = units.loc[pair_id]
        tally = counts.loc[pair_id] if pair_id in counts.index else None
        rows.append(
            UnitRow(
                pair_id=int(pair_id),
                prompt=str(unit["prompt_external_id"]),
                category=str(unit["category"]),
                turn=int(unit["turn"]),
                system_a=str(unit["system_a"]),
                system_b=str(unit["system_b"]),
                human_a=int(tally["A"]) if tally is not None else 0,
                human_b=int(tally["B"]) if tally is not None else 0,
                human_tie=int(tally["tie"]) if tally is not None else 0,
                majority=str(majority.get(pair_id, "")),
                judges={s: str(v.get(pair_id, "")) for s, v in judge_votes.items()},
            )
        )
    return rows


def unit_detail_get(*, study: Study, pair_id: int) -> dict[str, Any]:
    """One unit with both answers, every human judgment and every judge call on it."""
    pair = (
        Pair.objects.select_related("prompt", "answer_a__system", "answer_b__system")
        .filter(study=study)
        .get(pk=pair_id)
    )
    judgments = list(
        judgments_with_ratings(HumanJudgment.objects.filter(pair=pair))
        .select_related("worker")
        .order_by("pk")
    )
    calls = list(JudgeCall.objects.filter(pair=pair).select_related("run__judge").order_by("pk"))
    study_asks = study.form_acceptability or study.form_axes
    rated = study_asks or any(
        getattr(j, f"rating_{c}") is not None for j in judgments for c in RATING_COLUMNS
    )
    return {"pair": pair, "judgments": judgments, "calls": calls, "rated": rated}
