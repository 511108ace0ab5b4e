"""The plain per-unit listing of the drill-down that ``leaderboard.selectors.drilldown`` stores
with each snapshot and pages through in SQL: written for reading, one unit at a time, with the
judge, disagreement and pair filters applied in pandas. The unit list's tests compare the page's
rows with it."""

from __future__ import annotations

import pandas as pd

from leaderboard.selectors.drilldown import UnitRow
from leaderboard.selectors.frames import StudyVotes
from leaderboard.stats.majority import LABELS, people_majority


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
