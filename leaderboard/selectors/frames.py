"""A study's votes as long-format DataFrames, filtered: the reads every report section starts from.

Each frame is built from one table at a time (:func:`leaderboard.selectors.packed.frame_read_coded`,
no per-row queries), then joined in pandas on the pair id, so a million judgments cost a few
column scans rather than a million model instances.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
from django.db.models import F, Q

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System, Worker
from judges.models import JudgeCall, JudgeRun, Turns
from leaderboard.lookup import positions_of
from leaderboard.parallel import run_parallel
from leaderboard.selectors.packed import frame_read, frame_read_coded
from leaderboard.stats.majority import LABELS
from leaderboard.stats.mtbench import (
    CALL_ORDERS,
    calls_sort,
    judge_votes_combine,
    judge_votes_combine_sorted,
)

if TYPE_CHECKING:
    import pandas as pd

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
    "gold_kind",
    "system_a",
    "system_b",
]
HUMAN_COLUMNS = [
    "id",
    "pair_id",
    "rater",
    "label",
    "likert",
    "likert_shown",
    "a_left",
    "is_imported",
]
CALL_COLUMNS = ["pair_id", "run_id", "order", "label", "likert", "likert_shown"]
# The values of the text columns the report reads, sorted, as their Categorical's categories
# (LABELS and CALL_ORDERS from the statistics that read them).
GOLD_SIDES = ("", "A", "B", "tie")
GOLD_KIND_CATEGORIES = tuple(sorted(Pair.GoldKind.values))  # with "" (not gold)
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
    # The run judged every turn of each pair's prompt (Judge.turns "each"): only its calls at
    # the pair's own turn are votes on the pair, the turn people judged.
    every_turn: bool = False


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


def not_contrast_item(prefix: str = "") -> Q:
    """Leave out contrast items (docs/consistency.md): their two answers belong to two prompts,
    so they are no comparison of systems; only the consistency section reads them. On rows that
    point at a pair, an anti-join on the indexed `Pair.contrast` (no join on the pair)."""
    if not prefix:
        return Q(contrast__isnull=True)
    items = Pair.objects.filter(contrast__isnull=False).values("pk")
    return ~Q(**{f"{prefix.removesuffix('__')}_id__in": items})


def pair_q(filters: VoteFilters, prefix: str = "") -> Q:
    """The filters as a condition on pairs, or on rows that point at a pair through `prefix`;
    contrast items are never among them, nor rows that point at no pair (a single-answer grading
    judge's grade calls, judges.services.grading)."""
    q = not_contrast_item(prefix)
    if prefix:
        q &= Q(**{f"{prefix.removesuffix('__')}__isnull": False})
    if filters.category is not None:
        q &= Q(**{f"{prefix}prompt__category": filters.category})
    if filters.turn is not None:
        q &= Q(**{f"{prefix}turn": filters.turn})
    if filters.exclude_gold:
        q &= Q(**{f"{prefix}is_gold": False})
    return q


def study_pairs_frame(*, study: Study, filters: VoteFilters) -> pd.DataFrame:
    """The study's pairs (agreement units) that pass the filters, with their systems.

    The pairs are read from their own table alone; prompts, and answers with their systems, are
    read once each and attached by id, so that the pairs travel as numbers and the database joins
    nothing. Category, system and gold columns are Categorical, the prompt's id text.
    """
    import pandas as pd

    qs = Pair.objects.filter(pair_q(filters), study=study)
    frame = frame_read_coded(
        qs,
        (
            "id",
            "prompt_id",
            "turn",
            "is_gold",
            "gold_side",
            "gold_kind",
            "answer_a_id",
            "answer_b_id",
        ),
        [
            "pair_id",
            "prompt_id",
            "turn",
            "is_gold",
            "gold_side",
            "gold_kind",
            "answer_a",
            "answer_b",
        ],
        choices={"gold_side": GOLD_SIDES, "gold_kind": GOLD_KIND_CATEGORIES},
        flags=("is_gold",),
        top="pair_id",
    )
    prompts = frame_read(
        Prompt.objects.filter(study=study),
        ("id", "external_id", "category"),
        ("id", "external_id", "category"),
        text=("external_id", "category"),
    ).sort_values("id")
    prompt_ids = prompts["id"].to_numpy(dtype=np.int64)
    at = positions_of(prompt_ids, frame["prompt_id"].to_numpy(dtype=np.int64), "prompt")
    external = prompts["external_id"].to_numpy(dtype=object)
    frame["prompt_external_id"] = pd.Series(external[at], index=frame.index, dtype=object)
    frame["category"] = _categorical(prompts["category"].to_numpy(dtype=object), at)
    answers = frame_read_coded(
        Answer.objects.filter(prompt__study=study), ("id", "system_id"), ["id", "system_id"]
    ).sort_values("id")
    answer_ids = answers["id"].to_numpy(dtype=np.int64)
    answer_systems = answers["system_id"].to_numpy(dtype=np.int64)
    systems = dict(System.objects.filter(study=study).values_list("id", "name"))
    system_ids = np.array(sorted(systems), dtype=np.int64)
    names = np.array([systems[i] for i in system_ids.tolist()], dtype=object)
    for side in ("a", "b"):
        answer = positions_of(
            answer_ids, frame[f"answer_{side}"].to_numpy(dtype=np.int64), "answer"
        )
        at_system = positions_of(system_ids, answer_systems[answer], "system")
        frame[f"system_{side}"] = _categorical(names, at_system)
    frame["is_gold"] = frame["is_gold"].astype(bool)
    frame = frame[PAIR_COLUMNS]
    return frame.sort_values("pair_id", kind="stable").reset_index(drop=True)


def _categorical(values: npt.NDArray[Any], at: npt.NDArray[np.intp]) -> pd.Categorical:
    """``values[at]`` as a Categorical whose categories are the distinct values, sorted."""
    import pandas as pd

    categories, inverse = np.unique(values.astype(str), return_inverse=True)
    return pd.Categorical.from_codes(
        inverse.reshape(-1)[at] if len(at) else np.zeros(0, dtype=np.int64),
        categories=pd.Index(categories.astype(object)),
    )


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
            every_turn=run.turns == Turns.EACH,
        )
        for run in runs
    )


def _scores_as_float(frame: pd.DataFrame) -> pd.DataFrame:
    """Likert columns as floats with NaN for missing, so pandas aggregates them natively."""
    import pandas as pd

    for column in ("likert", "likert_shown"):
        frame[column] = pd.to_numeric(frame[column]).astype("float64")
    return frame


def _human_frame(*, study: Study, filters: VoteFilters, raters: RaterSet) -> pd.DataFrame:
    # Judgments of excluded participants stay out of every analysis (annotation's worker_exclude).
    import pandas as pd

    qs = HumanJudgment.objects.filter(
        pair_q(filters, "pair__"), study=study, excluded=False
    ).exclude(preference="")
    if raters == "experts":
        qs = qs.filter(worker__external_id__startswith=EXPERT_PREFIX)
    frame = frame_read_coded(
        qs,
        (
            "id",
            "pair_id",
            "worker_id",
            "preference",
            "likert",
            "likert_shown",
            "a_left",
            "is_imported",
        ),
        HUMAN_COLUMNS,
        choices={"label": LABELS},
        flags=("a_left", "is_imported"),
        small={"likert": 8, "likert_shown": 8},
        top="pair_id",
    )
    frame = _scores_as_float(frame)
    # Raters are named "w<worker id>", a Categorical over the names sorted as text.
    workers, inverse = np.unique(frame["rater"].to_numpy(dtype=np.int64), return_inverse=True)
    names = np.array([f"w{w}" for w in workers.tolist()], dtype=object)
    order = np.argsort(names.astype(str), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    frame["rater"] = pd.Categorical.from_codes(
        rank[inverse.reshape(-1)] if len(frame) else np.zeros(0, dtype=np.int64),
        categories=pd.Index(names[order]),
    )
    # Sorted by judgment id (unique), so the same rows always come in the same order; read in
    # that order already as a rule (a table filled in order).
    if not frame["id"].is_monotonic_increasing:
        frame = frame.sort_values("id", kind="stable")
    return frame.reset_index(drop=True)


def _calls_frame(*, sources: Sequence[JudgeSource], filters: VoteFilters) -> pd.DataFrame:
    """The done calls of the sources' runs; for one run, the run is not read but filled in, so
    that a call travels as one number (its pair on top of its packed choices and scores).

    A run that judged every turn of each pair's prompt gives its calls at the pair's own turn
    only (people judged the pair at that turn); the other runs' calls are all at it."""
    run_ids = [s.run_id for s in sources]
    qs = JudgeCall.objects.filter(
        pair_q(filters, "pair__"), run_id__in=run_ids, status=JudgeCall.Status.DONE
    ).exclude(preference="")
    every_turn = [s.run_id for s in sources if s.every_turn]
    if every_turn:
        qs = qs.filter(~Q(run_id__in=every_turn) | Q(turn=F("pair__turn")))
    one_run = len(run_ids) == 1
    fields: tuple[str, ...] = ("pair_id", "run_id", "order", "preference", "likert", "likert_shown")
    columns = CALL_COLUMNS
    if one_run:
        fields, columns = fields[:1] + fields[2:], columns[:1] + columns[2:]
    frame = frame_read_coded(
        qs,
        fields,
        columns,
        choices={"order": CALL_ORDERS, "label": LABELS},
        small={"likert": 8, "likert_shown": 8},
        top="pair_id",
    )
    if one_run:
        frame.insert(1, "run_id", np.full(len(frame), run_ids[0], dtype=np.int64))
    return _scores_as_float(frame)


def _calls_combined(
    *, sources: Sequence[JudgeSource], filters: VoteFilters
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sources' calls in calls_sort's order and their combined votes."""
    calls = calls_sort(_calls_frame(sources=sources, filters=filters))
    return calls, judge_votes_combine_sorted(calls) if len(calls) else judge_votes_combine(calls)


# The most parts the calls are read in at once, each on a database connection of its own.
_CALL_PARTS = 4


def study_votes_get(*, study: Study, filters: VoteFilters) -> StudyVotes:
    """Gather the study's votes for a report: people's and every selected judge run's."""
    import pandas as pd

    raters = study_raters_resolve(study=study, raters=filters.raters)
    sources = study_judge_sources(study=study, filters=filters)
    # PostgreSQL builds the results at once, in server processes of their own: the pairs, the
    # people's votes and the calls, these split by judge run (each run's calls found through the
    # index on the run) into up to _CALL_PARTS parts.
    # Each part is a range of runs by id, so that the parts, each sorted and combined in its
    # own thread, join in calls_sort's order.
    by_run = sorted(sources, key=lambda source: source.run_id)
    count = min(_CALL_PARTS, len(by_run))
    parts = [
        by_run[len(by_run) * i // count : len(by_run) * (i + 1) // count] for i in range(count)
    ]
    pairs, human, *call_parts = run_parallel(
        lambda: study_pairs_frame(study=study, filters=filters),
        lambda: _human_frame(study=study, filters=filters, raters=raters),
        *(
            functools.partial(_calls_combined, sources=part, filters=filters)
            for part in parts or [[]]
        ),
        uses_database=True,
    )
    calls = calls_sort(pd.concat([part[0] for part in call_parts], ignore_index=True))
    combined = pd.concat([part[1] for part in call_parts], ignore_index=True)
    names = sorted({s.name for s in sources})
    position = {s.run_id: names.index(s.name) for s in sources}
    runs, inverse = np.unique(combined["run_id"].to_numpy(dtype=np.int64), return_inverse=True)
    run_codes = np.array([position[r] for r in runs.tolist()], dtype=np.int64)
    combined["source"] = pd.Categorical.from_codes(
        run_codes[inverse.reshape(-1)], categories=pd.Index(names)
    )
    combined["rater"] = combined["source"]
    # What was shown first, for position bias: only live calls in one order know it.
    human_cols = pairs.set_index("pair_id")
    human = human.join(human_cols, on="pair_id")
    human["source"] = pd.Categorical.from_codes(
        np.zeros(len(human), dtype=np.int64), pd.Index(["human"])
    )
    a_left = human["a_left"].to_numpy(dtype=object)
    human["shown_first"] = pd.Categorical.from_codes(
        np.where(a_left == True, 0, np.where(a_left == False, 1, -1)),  # noqa: E712
        categories=pd.Index(LABELS),
    )
    human = human[VOTE_COLUMNS]
    judges = combined.join(human_cols, on="pair_id")
    judges["likert_shown"] = None
    judges["shown_first"] = None
    judges["is_imported"] = judges["run_id"].map(
        {s.run_id: s.status == JudgeRun.Status.IMPORTED for s in sources}
    )
    # In (run, pair) order already: the combination of calls in calls_sort's order.
    judges = judges[[*VOTE_COLUMNS, "run_id"]].reset_index(drop=True)
    return StudyVotes(
        pairs=pairs,
        human=human,
        judges=judges,
        sources=sources,
        raters=raters,
        filters=filters,
        calls=calls,
    )
