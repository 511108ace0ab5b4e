"""The drill-down: the agreement units behind a report cell, and one unit with all its votes.

The analysis worker computes every unit's row from the votes (:func:`unit_table_get`) and stores
them with the snapshot (`ReportUnit`); the unit list reads one page of them in SQL
(:func:`unit_page_get`), never the votes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, QuerySet
from django.db.models.fields.json import KeyTextTransform

from annotation.models import HumanJudgment, Pair, Study
from judges.models import JudgeCall
from leaderboard.models import ReportSnapshot, ReportUnit
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


# The stored columns of a unit (`ReportUnit`), in the order of :func:`unit_table_get`'s rows.
UNIT_COLUMNS = (
    "pair_id",
    "prompt",
    "category",
    "turn",
    "system_a",
    "system_b",
    "human_a",
    "human_b",
    "human_tie",
    "majority",
    "judges",
)


def unit_table_get(*, votes: StudyVotes) -> list[tuple[Any, ...]]:
    """Every agreement unit with a vote (a person's or a judge source's), by pair id, as rows of
    :data:`UNIT_COLUMNS`: the people's votes counted by label (A, B, tie), their majority
    (:func:`leaderboard.stats.majority.people_majority`: a tied count is a tie; empty without
    human votes) and `judges`, the JSON object of each judge source's vote on the unit, naming
    only the sources that voted. The rows the analysis worker stores with a snapshot, computed
    by whole columns (tested equal to the plain per-unit listing of
    tests/leaderboard/reference_units.py)."""
    import pandas as pd

    human = votes.human
    counts = (
        human.groupby(["pair_id", "label"], observed=False).size().unstack("label", fill_value=0)
    )
    counts = counts.reindex(columns=list(LABELS), fill_value=0)
    majority = people_majority(human)
    judges = votes.judges
    names = sorted(set(judges["source"].tolist()))
    units = votes.pairs.set_index("pair_id")
    wanted = units.index.intersection(
        counts.index.union(pd.Index(judges["pair_id"].unique()))
    ).sort_values()
    tally = counts.reindex(wanted, fill_value=0)
    mine = majority.reindex(wanted)
    by_source = []
    for name in names:
        vote = judges[judges["source"] == name].set_index("pair_id")["label"]
        by_source.append((name, wanted.isin(vote.index), vote.reindex(wanted).to_numpy(object)))
    judged = [
        json.dumps(
            {name: str(labels[i]) for name, present, labels in by_source if present[i]},
            ensure_ascii=False,
        )
        for i in range(len(wanted))
    ]
    picked = units.loc[wanted]
    return list(
        zip(
            wanted.astype(int).tolist(),
            picked["prompt_external_id"].astype(str).tolist(),
            picked["category"].astype(str).tolist(),
            picked["turn"].astype(int).tolist(),
            picked["system_a"].astype(str).tolist(),
            picked["system_b"].astype(str).tolist(),
            tally["A"].astype(int).tolist(),
            tally["B"].astype(int).tolist(),
            tally["tie"].astype(int).tolist(),
            [str(m) if m is not None and m == m else "" for m in mine.tolist()],
            judged,
            strict=True,
        )
    )


def unit_page_get(
    *,
    snapshot: ReportSnapshot,
    sources: Sequence[str],
    judge: str | None = None,
    disagree: bool = False,
    only: QuerySet[Any, int] | None = None,
    page: str | int | None = None,
    page_size: int = 200,
) -> tuple[Page[ReportUnit], list[UnitRow]]:
    """One page (by pair id) of the snapshot's stored units behind a report cell: every unit;
    with `judge`, the units that judge source voted on; with `disagree` too, those where its
    vote is not the people's majority (units without human votes have no majority and are left
    out); with `only` (a query of pair ids), those pairs. Two statements: the count and the page
    (LIMIT/OFFSET on the (snapshot, pair) primary key). Each row's `judges` names every one of
    `sources` (the report's judge sources), empty where it did not vote. Returns the page (for
    its links) and its rows."""
    units = ReportUnit.objects.filter(snapshot=snapshot)
    if only is not None:
        units = units.filter(pair_id__in=only)
    if judge is not None:
        units = units.filter(judges__has_key=judge)
        if disagree:
            units = (
                units.exclude(majority="")
                .annotate(vote=KeyTextTransform(judge, "judges"))
                .exclude(vote=F("majority"))
            )
    found = Paginator(units.order_by("pair_id"), page_size).get_page(page)
    rows = [
        UnitRow(
            pair_id=unit.pair_id,
            prompt=unit.prompt,
            category=unit.category,
            turn=unit.turn,
            system_a=unit.system_a,
            system_b=unit.system_b,
            human_a=unit.human_a,
            human_b=unit.human_b,
            human_tie=unit.human_tie,
            majority=unit.majority,
            judges={source: str(unit.judges.get(source, "")) for source in sources},
        )
        for unit in found.object_list
    ]
    return found, rows


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
