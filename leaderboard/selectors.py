"""Reads for the analysis: a study's votes as long-format DataFrames, filtered.

Each frame is built from `values_list` over one table at a time (no per-row queries), then joined
in pandas on the pair id, so a million judgments cost a few column scans rather than a million
model instances.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from django.db.models import Q

from annotation.models import HumanJudgment, Pair, Study, Worker
from judges.models import JudgeCall, JudgeRun
from leaderboard.models import ReportSnapshot

RaterSet = Literal["all", "experts"]
EXPERT_PREFIX = "expert_"

PAIR_COLUMNS = [
    "pair_id",
    "prompt_id",
    "prompt_external_id",
    "category",
    "turn",
    "is_gold",
    "gold_side",
    "system_a",
    "system_b",
]
HUMAN_COLUMNS = [
    "pair_id",
    "rater",
    "label",
    "likert",
    "likert_shown",
    "a_left",
    "is_imported",
]
CALL_COLUMNS = ["pair_id", "run_id", "order", "label", "likert", "likert_shown", "verdict_label"]
VOTE_COLUMNS = [
    "pair_id",
    "rater",
    "source",
    "label",
    "likert",
    "likert_shown",
    "shown_first",
    "category",
    "turn",
    "is_gold",
    "is_imported",
    "system_a",
    "system_b",
]


@dataclass(frozen=True)
class VoteFilters:
    """Which votes a report reads. `raters=None` means: experts when the study has raters named
    expert_* (MT-Bench's published data), all raters otherwise."""

    category: str | None = None
    turn: int | None = None
    exclude_gold: bool = False
    judge_run_ids: tuple[int, ...] | None = None
    raters: RaterSet | None = None

    def as_params(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "turn": self.turn,
            "exclude_gold": self.exclude_gold,
            "judge_run_ids": list(self.judge_run_ids) if self.judge_run_ids is not None else None,
            "raters": self.raters,
        }


@dataclass(frozen=True)
class JudgeSource:
    """One judge run as a source of votes in a report."""

    name: str
    run_id: int
    judge_name: str
    judge_kind: str
    model_name: str
    status: str


@dataclass(frozen=True)
class StudyVotes:
    """A study's votes after filtering: people's, and each judge run's, one row per vote."""

    pairs: pd.DataFrame
    human: pd.DataFrame
    judges: pd.DataFrame
    sources: tuple[JudgeSource, ...]
    raters: RaterSet
    filters: VoteFilters
    calls: pd.DataFrame = field(repr=False)


def study_raters_resolve(*, study: Study, raters: RaterSet | None) -> RaterSet:
    """Return the rater set a report uses: the one asked for, or the default for the study."""
    if raters is not None:
        return raters
    has_experts = Worker.objects.filter(study=study, external_id__startswith=EXPERT_PREFIX).exists()
    return "experts" if has_experts else "all"


def _pair_q(filters: VoteFilters, prefix: str = "") -> Q:
    """The filters as a condition on pairs, or on rows that point at a pair through `prefix`."""
    q = Q()
    if filters.category is not None:
        q &= Q(**{f"{prefix}prompt__category": filters.category})
    if filters.turn is not None:
        q &= Q(**{f"{prefix}turn": filters.turn})
    if filters.exclude_gold:
        q &= Q(**{f"{prefix}is_gold": False})
    return q


def study_pairs_frame(*, study: Study, filters: VoteFilters) -> pd.DataFrame:
    """The study's pairs (agreement units) that pass the filters, with their systems."""
    qs = Pair.objects.filter(_pair_q(filters), study=study)
    rows = qs.order_by().values_list(
        "id",
        "prompt_id",
        "prompt__external_id",
        "prompt__category",
        "turn",
        "is_gold",
        "gold_side",
        "answer_a__system__name",
        "answer_b__system__name",
    )
    frame = pd.DataFrame.from_records(list(rows), columns=PAIR_COLUMNS)
    return frame.sort_values("pair_id", kind="stable").reset_index(drop=True)


def study_judge_sources(*, study: Study, filters: VoteFilters) -> tuple[JudgeSource, ...]:
    """The judge runs a report reads: those named in the filters, or every run of the study.

    A judge with one run is named by the judge's name; a judge with several by name and run id.
    """
    qs = JudgeRun.objects.filter(study=study).select_related("judge").order_by("judge__name", "pk")
    if filters.judge_run_ids is not None:
        qs = qs.filter(pk__in=filters.judge_run_ids)
    runs = list(qs)
    per_judge: dict[str, int] = {}
    for run in runs:
        per_judge[run.judge.name] = per_judge.get(run.judge.name, 0) + 1
    return tuple(
        JudgeSource(
            name=run.judge.name
            if per_judge[run.judge.name] == 1
            else f"{run.judge.name} (run {run.pk})",
            run_id=run.pk,
            judge_name=run.judge.name,
            judge_kind=run.judge.kind,
            model_name=run.judge.model_name,
            status=run.status,
        )
        for run in runs
    )


def _scores_as_float(frame: pd.DataFrame) -> pd.DataFrame:
    """Likert columns as floats with NaN for missing, so pandas aggregates them natively."""
    for column in ("likert", "likert_shown"):
        frame[column] = pd.to_numeric(frame[column]).astype("float64")
    return frame


def _human_frame(*, study: Study, filters: VoteFilters, raters: RaterSet) -> pd.DataFrame:
    qs = HumanJudgment.objects.filter(_pair_q(filters, "pair__"), study=study).exclude(
        preference=""
    )
    if raters == "experts":
        qs = qs.filter(worker__external_id__startswith=EXPERT_PREFIX)
    rows = qs.order_by().values_list(
        "pair_id", "worker_id", "preference", "likert", "likert_shown", "a_left", "is_imported"
    )
    frame = _scores_as_float(pd.DataFrame.from_records(list(rows), columns=HUMAN_COLUMNS))
    frame["rater"] = "w" + frame["rater"].astype(str)
    return frame


def _calls_frame(*, sources: Sequence[JudgeSource], filters: VoteFilters) -> pd.DataFrame:
    run_ids = [s.run_id for s in sources]
    rows = (
        JudgeCall.objects.filter(
            _pair_q(filters, "pair__"), run_id__in=run_ids, status=JudgeCall.Status.DONE
        )
        .exclude(preference="")
        .order_by()
        .values_list(
            "pair_id", "run_id", "order", "preference", "likert", "likert_shown", "verdict_label"
        )
    )
    return _scores_as_float(pd.DataFrame.from_records(list(rows), columns=CALL_COLUMNS))


def judge_votes_combine(calls: pd.DataFrame) -> pd.DataFrame:
    """One vote per (run, pair) from a judge's calls, as MT-Bench combines both orders.

    A verdict given on both orders at once (`both`) is the vote. Otherwise the A-first and
    B-first verdicts agree and give the vote, or disagree and give a tie ("inconsistent", as in
    Zheng et al. 2023); a pair judged in one order only takes that verdict. The canonical Likert
    vote is the mean of the orders' canonical scores when both have one.
    """
    if calls.empty:
        return pd.DataFrame(columns=["run_id", "pair_id", "label", "likert"])
    ordered = calls.sort_values(["run_id", "pair_id", "order"], kind="stable")
    grouped = ordered.groupby(["run_id", "pair_id"], sort=True)
    first_label = grouped["label"].first()
    n_labels = grouped["label"].nunique()
    label = first_label.where(n_labels == 1, "tie")
    likert = grouped["likert"].mean()
    out = pd.DataFrame({"label": label, "likert": likert}).reset_index()
    return out


def study_votes_get(*, study: Study, filters: VoteFilters) -> StudyVotes:
    """Gather the study's votes for a report: people's and every selected judge run's."""
    raters = study_raters_resolve(study=study, raters=filters.raters)
    pairs = study_pairs_frame(study=study, filters=filters)
    human = _human_frame(study=study, filters=filters, raters=raters)
    sources = study_judge_sources(study=study, filters=filters)
    calls = _calls_frame(sources=sources, filters=filters)
    combined = judge_votes_combine(calls)
    name_of_run = {s.run_id: s.name for s in sources}
    combined["source"] = combined["run_id"].map(name_of_run)
    combined["rater"] = combined["source"]
    # What was shown first, for position bias: only live calls in one order know it.
    human_cols = pairs.set_index("pair_id")
    human = human.join(human_cols, on="pair_id")
    human["source"] = "human"
    human["shown_first"] = human["a_left"].map({True: "A", False: "B"}).astype(object)
    human.loc[human["a_left"].isna(), "shown_first"] = None
    human = (
        human[VOTE_COLUMNS]
        .sort_values(["pair_id", "rater", "label"], kind="stable")
        .reset_index(drop=True)
    )
    judges = combined.join(human_cols, on="pair_id")
    judges["likert_shown"] = None
    judges["shown_first"] = None
    judges["is_imported"] = judges["run_id"].map(
        {s.run_id: s.status == JudgeRun.Status.IMPORTED for s in sources}
    )
    judges = (
        judges[[*VOTE_COLUMNS, "run_id"]]
        .sort_values(["run_id", "pair_id"], kind="stable")
        .reset_index(drop=True)
    )
    return StudyVotes(
        pairs=pairs,
        human=human,
        judges=judges,
        sources=sources,
        raters=raters,
        filters=filters,
        calls=calls.sort_values(["run_id", "pair_id", "order"], kind="stable").reset_index(
            drop=True
        ),
    )


def votes_data_hash(*, votes: StudyVotes) -> str:
    """SHA-256 of the rows a report is computed from, in a fixed order and text form."""
    digest = hashlib.sha256()
    for name, frame in (
        ("pairs", votes.pairs),
        ("human", votes.human),
        ("calls", votes.calls),
    ):
        digest.update(f"[{name}]\n".encode())
        digest.update(frame.to_csv(index=False, lineterminator="\n").encode())
    return digest.hexdigest()


def report_snapshot_find(
    *, study: Study, params_hash: str, data_hash: str
) -> ReportSnapshot | None:
    """The stored report for these parameters and these rows, if one was computed."""
    return (
        ReportSnapshot.objects.filter(study=study, params_hash=params_hash, data_hash=data_hash)
        .order_by("-created_at")
        .first()
    )


def study_filter_choices(*, study: Study) -> dict[str, list[Any]]:
    """Categories, turns and judge runs a researcher may filter the study's analysis by."""
    pairs = Pair.objects.filter(study=study).order_by()
    categories = sorted(set(pairs.values_list("prompt__category", flat=True)) - {""})
    turns = sorted(set(pairs.values_list("turn", flat=True)))
    runs = [
        {"id": s.run_id, "name": s.name}
        for s in study_judge_sources(study=study, filters=VoteFilters())
    ]
    has_gold = pairs.filter(Q(is_gold=True)).exists()
    return {"categories": categories, "turns": turns, "runs": runs, "has_gold": [has_gold]}
