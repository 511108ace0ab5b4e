"""The reads report sections declare (:mod:`leaderboard.selectors.reads`): the rows that the
vote frames do not carry (answer lengths and style counts, cited values, gold ranks and scores,
per-answer ratings and grades, costs and pay, propensities, the follow-up origin, the PL runs'
splits, the contrast items). Each read is a selector returning a frozen dataclass that feeds
the report's data hash its own rows; :data:`READS` is their one registry, in the order the data
hash takes them."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db.models import Count, F, Func, IntegerField, Q, QuerySet, Sum, Value
from django.db.models.sql.compiler import SQLCompiler

from annotation.models import Answer, HumanJudgment, Pair, PayEntry, Study
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun, ReferenceCall
from leaderboard.lookup import positions_of
from leaderboard.models import Followup, FollowupPair
from leaderboard.parallel import run_parallel
from leaderboard.selectors.contrast import ConsistencyInputs, consistency_inputs_get
from leaderboard.selectors.frames import EXPERT_PREFIX, StudyVotes, VoteFilters, pair_q
from leaderboard.selectors.packed import frame_read_coded
from leaderboard.selectors.ratings import ratings_frame
from leaderboard.selectors.reads import Hasher, Read, ReadContext
from leaderboard.selectors.snapshots import frame_hash_update

if TYPE_CHECKING:
    import pandas as pd


class TurnLength(Func):
    """Characters of ``turns[turn - 1]`` of a JSON list of strings; NULL when that turn is
    missing."""

    output_field = IntegerField()

    def _parts(self, compiler: SQLCompiler, connection: Any) -> tuple[str, str, list[Any]]:
        turns_sql, turns_params = compiler.compile(self.source_expressions[0])
        turn_sql, turn_params = compiler.compile(self.source_expressions[1])
        return turns_sql, turn_sql, [*turns_params, *turn_params]

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: Any, **extra_context: Any
    ) -> tuple[str, list[Any]]:
        turns, turn, params = self._parts(compiler, connection)
        return f"char_length(({turns}) ->> (({turn}) - 1))", params


# Markdown and length counts of an answer's turn, as LMArena's style control counts them
# (FastChat's count_markdown_elements, after removing fenced code blocks): PostgreSQL ARE
# patterns for regexp_count, with the flags ("n": ^ matches at every line start).
STYLE_PATTERNS: dict[str, tuple[str, str]] = {
    "tokens": (r"\S+", ""),
    "headers": (r"^#{1,6}\s", "n"),
    "lists": (r"^\s*(\d+\.|[-*+])\s", "n"),
    "bold": (r"\*\*[^*\n]+\*\*|__[^_\n]+__", ""),
}
STYLE_COLUMNS = ["pair_id", *(f"{name}_{side}" for side in "ab" for name in STYLE_PATTERNS)]
_CODE_BLOCK = r"```[^`]*```"
COST_COLUMNS = ["run_id", "cost_usd", "pairs", "pl_members"]
GRADE_COLUMNS = ["run_id", "answer_id", "turn", "grade", "prompt_id", "category", "system"]
PROPENSITY_COLUMNS = ["pair_id", "rater", "propensity"]


class TurnStyleCount(TurnLength):
    """Matches of a pattern in ``turns[turn - 1]`` with fenced code blocks removed; NULL when
    that turn is missing."""

    output_field = IntegerField()

    def __init__(self, turns: Any, turn: Any, *, pattern: str, flags: str) -> None:
        super().__init__(turns, turn)
        self.pattern, self.flags = pattern, flags

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: Any, **extra_context: Any
    ) -> tuple[str, list[Any]]:
        turns, turn, params = self._parts(compiler, connection)
        text = f"regexp_replace(({turns}) ->> (({turn}) - 1), %s, '', 'g')"
        return (
            f"regexp_count({text}, %s, 1, %s)",
            [*params, _CODE_BLOCK, self.pattern, self.flags],
        )


@dataclass(frozen=True)
class PeoplePay:
    """The pay ledger's judgment entries for the selection's judgments (not rejected): their
    sum in cents and how many judgments they pay."""

    cents: int
    judgments: int

    def digest(self) -> str:
        return f"{self.cents}:{self.judgments}"


@dataclass(frozen=True)
class FollowupOrigin:
    """Where a follow-up study came from (`leaderboard.models.Followup`): the source study's
    slug ("" when deleted), the two runs' names, the filter, and its pairs: pair_id, agreed
    (first, second or neither: which run voted the better side), basis."""

    source_study: str
    first: str
    second: str
    agreeing: str
    pairs: pd.DataFrame

    def digest(self) -> str:
        """The origin's text fields, for the data hash (the pairs are hashed as a frame)."""
        return "|".join((self.source_study, self.first, self.second, self.agreeing))


@dataclass(frozen=True)
class PLSplit:
    """A PL run's training split: the prompts of the report's study its training held out.

    held_out is None when the model was trained on another study (every prompt here is unseen
    by it: no restriction) or when its split is not known (`known` False: a training from
    before the split was stored, whose artifact was not found).
    """

    run_id: int
    judge: str
    trained_here: bool
    known: bool
    held_out: tuple[int, ...] | None
    seed: int
    holdout: float | None

    def digest(self) -> str:
        return f"{self.run_id}:{self.trained_here}:{self.known}:{self.held_out}:{self.seed}"


def followup_origin_get(*, study: Study) -> FollowupOrigin | None:
    """The study's follow-up origin and its pairs' groups; None when it is no follow-up."""
    origin = Followup.objects.filter(study=study).select_related("source_study").first()
    if origin is None:
        return None
    pairs = _records(
        FollowupPair.objects.filter(followup=origin)
        .order_by("pair_id")
        .values_list("pair_id", "agreed", "basis"),
        ["pair_id", "agreed", "basis"],
    )
    return FollowupOrigin(
        source_study=origin.source_study.slug if origin.source_study else "",
        first=origin.first_label,
        second=origin.second_label,
        agreeing=origin.agreeing,
        pairs=pairs,
    )


def pl_splits_get(*, study: Study, run_ids: list[int]) -> tuple[PLSplit, ...]:
    """The training split of each PL run among `run_ids` whose judge came from a training
    (`judges.models.PLTraining`), by run id."""
    rows = (
        JudgeRun.objects.filter(
            pk__in=run_ids, judge__kind=Judge.Kind.PL, judge__pl_training__isnull=False
        )
        .order_by("pk")
        .values_list(
            "pk",
            "judge__name",
            "judge__pl_training__study_id",
            "judge__pl_training__held_out_prompts",
            "judge__pl_training__seed",
            "judge__pl_training__params",
        )
    )
    splits = []
    for run_id, name, trained_on, held, seed, params in rows:
        here = trained_on == study.pk
        holdout = (params or {}).get("holdout")
        splits.append(
            PLSplit(
                run_id=run_id,
                judge=name,
                trained_here=here,
                known=held is not None,
                held_out=tuple(sorted(int(p) for p in held)) if here and held is not None else None,
                seed=int(seed),
                holdout=float(holdout) if holdout is not None else None,
            )
        )
    return tuple(splits)


def _records(rows: Any, columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame.from_records(list(rows), columns=columns)


def report_lengths_get(*, study: Study, filters: VoteFilters) -> pd.DataFrame:
    """The filtered pairs' answer lengths at the judged turn (the read ``LENGTHS``).

    Needs the filters only, so that a report may read it beside the votes. The pairs are read
    from their own table, then each answer's length is read once for each turn the pairs judge
    (the JSON of an answer's turns is opened once per answer and turn, not once per pair side)
    and attached to the pairs by id. Both reads are numbers only, in binary from PostgreSQL.
    """
    pairs = frame_read_coded(
        Pair.objects.filter(pair_q(filters), study=study),
        ("pk", "answer_a_id", "answer_b_id", "turn"),
        ["pair_id", "answer_a_id", "answer_b_id", "turn"],
    )
    pairs = pairs.sort_values("pair_id", kind="stable").reset_index(drop=True)
    turns = np.unique(pairs["turn"].to_numpy(dtype=np.int64))
    columns = [f"len_{t}" for t in turns.tolist()]
    answers = Answer.objects.filter(prompt__study=study).annotate(
        **{
            name: TurnLength(F("turns"), Value(t, output_field=IntegerField()))
            for name, t in zip(columns, turns.tolist(), strict=True)
        }
    )
    table = frame_read_coded(answers, ("pk", *columns), ["id", *columns]).sort_values("id")
    answer_ids = table["id"].to_numpy(dtype=np.int64)
    # Row: the answer; column: the turn, in the order of `turns`.
    length = table[columns].to_numpy(dtype=np.float64).reshape(len(table), len(columns))
    turn_at = np.searchsorted(turns, pairs["turn"].to_numpy(dtype=np.int64))
    out = pairs[["pair_id", "answer_a_id", "answer_b_id"]].astype("int64")
    for side in ("a", "b"):
        answer_at = positions_of(answer_ids, out[f"answer_{side}_id"].to_numpy(), "answer")
        out[f"len_{side}"] = length[answer_at, turn_at] if len(out) else np.zeros(0)
    return out


def report_styles_get(*, study: Study, filters: VoteFilters) -> pd.DataFrame:
    """The filtered pairs' style counts at the judged turn (the read ``STYLES``): per answer
    and judged turn, its words (whitespace-separated), markdown headers, list items and bold
    spans (:data:`STYLE_PATTERNS`, counted by PostgreSQL's regexp_count once per answer and
    turn), attached to the pairs as :func:`report_lengths_get` attaches lengths; pairs where a
    side has no text at that turn are left out."""
    import pandas as pd

    pairs = frame_read_coded(
        Pair.objects.filter(pair_q(filters), study=study),
        ("pk", "answer_a_id", "answer_b_id", "turn"),
        ["pair_id", "answer_a_id", "answer_b_id", "turn"],
    )
    pairs = pairs.sort_values("pair_id", kind="stable").reset_index(drop=True)
    if pairs.empty:
        return pd.DataFrame(columns=STYLE_COLUMNS)
    turns = np.unique(pairs["turn"].to_numpy(dtype=np.int64)).tolist()
    names = {(feature, t): f"{feature}_{t}" for t in turns for feature in STYLE_PATTERNS}
    answers = Answer.objects.filter(prompt__study=study).annotate(
        **{
            column: TurnStyleCount(
                F("turns"),
                Value(t, output_field=IntegerField()),
                pattern=STYLE_PATTERNS[feature][0],
                flags=STYLE_PATTERNS[feature][1],
            )
            for (feature, t), column in names.items()
        }
    )
    columns = list(names.values())
    table = frame_read_coded(answers, ("pk", *columns), ["id", *columns]).sort_values("id")
    answer_ids = table["id"].to_numpy(dtype=np.int64)
    turn_of = pairs["turn"].to_numpy(dtype=np.int64)
    out = pairs[["pair_id"]].astype("int64")
    keep = np.ones(len(out), dtype=bool)
    for side in ("a", "b"):
        at = positions_of(answer_ids, pairs[f"answer_{side}_id"].to_numpy(), "answer")
        for feature in STYLE_PATTERNS:
            values = np.full(len(out), np.nan)
            for t in turns:
                here = turn_of == t
                values[here] = table[names[(feature, t)]].to_numpy(dtype=np.float64)[at[here]]
            out[f"{feature}_{side}"] = values
        keep &= out[f"tokens_{side}"].to_numpy() > 0
    return out[keep].reset_index(drop=True)


def report_propensities_get(*, study: Study, judgments: Any) -> pd.DataFrame:
    """An active study's judgments (of ``judgments``, the filtered, not excluded ones with a
    preference) whose assignment recorded a propensity (PROPENSITY_COLUMNS); no read for a
    uniform study."""
    import pandas as pd

    if study.selection != Study.Selection.ACTIVE:
        return _records([], PROPENSITY_COLUMNS)
    frame = _records(
        judgments.filter(assignment__propensity__isnull=False)
        .order_by("pk")
        .values_list("pair_id", "worker_id", "assignment__propensity"),
        PROPENSITY_COLUMNS,
    )
    frame["rater"] = "w" + frame["rater"].astype(str)
    frame["propensity"] = pd.to_numeric(frame["propensity"]).astype("float64")
    return frame


def report_costs_get(
    *, study: Study, filters: VoteFilters, judgments: Any, run_ids: list[int]
) -> tuple[pd.DataFrame, PeoplePay]:
    """Per run, the summed cost of its calls on the filtered pairs and how many pairs they
    judged (one grouped read of the calls), and the judgment pay of ``judgments`` (the
    filtered, not excluded judgments of the rater set), rejected entries left out.

    A panel run's cost is the sum of its member runs' costs on the filtered pairs (its own
    derived calls cost nothing), its pairs those it judged, and ``pl_members`` how many of its
    members are PL reward models, which the report prices at the researcher's rate; 0 for
    every other run. A run that reads reference answers carries what writing them cost
    (:func:`_reference_costs`)."""
    import pandas as pd

    # A panel's cost is its members' (judges.services.panels): their runs are read with the
    # report's, and each panel's row sums theirs.
    members = list(
        JudgeRun.panel_sources.through.objects.filter(from_judgerun_id__in=run_ids)
        .order_by("from_judgerun_id", "to_judgerun_id")
        .values_list("from_judgerun_id", "to_judgerun_id", "to_judgerun__judge__kind")
    )
    read_ids = sorted(set(run_ids) | {member for _, member, _ in members})
    costs = _records(
        JudgeCall.objects.filter(pair_q(filters, "pair__"), run_id__in=read_ids)
        .values("run_id")
        .annotate(cost=Sum("cost_usd"), pairs=Count("pair_id", distinct=True))
        .order_by("run_id")
        .values_list("run_id", "cost", "pairs"),
        COST_COLUMNS[:3],
    )
    costs["cost_usd"] = pd.to_numeric(costs["cost_usd"]).astype("float64")
    graded = _grade_costs(study=study, filters=filters, run_ids=read_ids)
    if graded:
        costs["cost_usd"] += costs["run_id"].map(graded).fillna(0.0)
    # The members' own calls, before the references: a panel counts its references once.
    spent = costs.set_index("run_id")["cost_usd"].copy()
    references = _reference_costs(study=study, filters=filters, run_ids=read_ids, members=members)
    if references:
        costs["cost_usd"] += costs["run_id"].map(references).fillna(0.0)
    costs["pl_members"] = 0
    if members:
        for panel_id in sorted({panel for panel, _, _ in members}):
            own = [(m, kind) for p, m, kind in members if p == panel_id]
            total = float(sum(spent.get(m, 0.0) for m, _ in own)) + references.get(panel_id, 0.0)
            costs.loc[costs["run_id"] == panel_id, "cost_usd"] = total
            costs.loc[costs["run_id"] == panel_id, "pl_members"] = sum(
                kind == Judge.Kind.PL for _, kind in own
            )
        costs = costs[costs["run_id"].isin(run_ids)].reset_index(drop=True)
    costs["pl_members"] = costs["pl_members"].astype("int64")
    paid = (
        PayEntry.objects.filter(
            study=study, kind=PayEntry.Kind.JUDGMENT, judgment__in=judgments.values("pk")
        )
        .exclude(status=PayEntry.Status.REJECTED)
        .aggregate(cents=Sum("amount_cents"), judgments=Count("judgment_id", distinct=True))
    )
    return costs, PeoplePay(int(paid["cents"] or 0), int(paid["judgments"] or 0))


def _on_pair_answers(*, study: Study, filters: VoteFilters) -> Q:
    """Grade calls (judges.services.grading) of the answers of the filtered pairs, at the
    report's turn when it names one: the pairs are those of every turn then, since a judge of
    every turn (Judge.turns "each") grades an answer at turns it has no pair at."""
    pairs = Pair.objects.filter(pair_q(dataclasses.replace(filters, turn=None)), study=study)
    on_answers = Q(answer_id__in=pairs.values("answer_a_id")) | Q(
        answer_id__in=pairs.values("answer_b_id")
    )
    if filters.turn is not None:
        on_answers &= Q(turn=filters.turn)
    return on_answers & Q(answer__isnull=False)


def _grade_costs(*, study: Study, filters: VoteFilters, run_ids: list[int]) -> dict[int, float]:
    """Per single-answer grading run, the cost of its grade calls on the filtered pairs' answers
    (its pair calls are derived from them and cost nothing); one grouped read of those calls."""
    rows = (
        JudgeCall.objects.filter(_on_pair_answers(study=study, filters=filters), run_id__in=run_ids)
        .values("run_id")
        .annotate(cost=Sum("cost_usd"))
        .order_by("run_id")
        .values_list("run_id", "cost")
    )
    return {int(run_id): float(cost or 0) for run_id, cost in rows}


def _reference_costs(
    *, study: Study, filters: VoteFilters, run_ids: list[int], members: list[tuple[int, int, str]]
) -> dict[int, float]:
    """Per run that reads reference answers, what writing the references of the prompts it
    judged on the filtered pairs cost (the reference ledger, judges.models.ReferenceCall: every
    reference judge's rows for those prompts, failed attempts included); {} with no read when
    the study names no reference categories.

    A run reads them when its judge has a reference template (judges.services.grading), a
    panel's when one of its members' does. Each such run carries the references in full (what
    the judge would cost alone); a panel carries them once, whatever its members."""
    categories = list(study.reference_categories or [])
    if not categories or not run_ids:
        return {}
    guided = set(
        JudgeRun.objects.filter(pk__in=run_ids)
        .exclude(judge__reference_template="")
        .values_list("pk", flat=True)
    )
    guided |= {panel for panel, member, _ in members if member in guided}
    if not guided:
        return {}
    per_prompt = {
        int(prompt_id): float(cost)
        for prompt_id, cost in ReferenceCall.objects.filter(
            study=study, prompt__category__in=categories
        )
        .values("prompt_id")
        .annotate(cost=Sum("cost_usd"))
        .order_by("prompt_id")
        .values_list("prompt_id", "cost")
        if cost
    }
    if not per_prompt:
        return {}
    judged = (
        JudgeCall.objects.filter(
            pair_q(filters, "pair__"), run_id__in=sorted(guided), pair__prompt_id__in=per_prompt
        )
        .order_by()
        .values_list("run_id", "pair__prompt_id")
        .distinct()
    )
    out: dict[int, float] = {}
    for run_id, prompt_id in judged:
        out[int(run_id)] = out.get(int(run_id), 0.0) + per_prompt[int(prompt_id)]
    return out


def report_grades_get(*, study: Study, filters: VoteFilters, run_ids: list[int]) -> pd.DataFrame:
    """The report's runs' recorded grades of the filtered pairs' answers (GRADE_COLUMNS: the
    grade call's run, answer, turn and grade, the answer's prompt, category and system name)."""
    import pandas as pd

    frame = _records(
        JudgeCall.objects.filter(
            _on_pair_answers(study=study, filters=filters),
            run_id__in=run_ids,
            status=JudgeCall.Status.DONE,
            grade__isnull=False,
        )
        .order_by("run_id", "answer_id", "turn")
        .values_list(
            "run_id",
            "answer_id",
            "turn",
            "grade",
            "answer__prompt_id",
            "answer__prompt__category",
            "answer__system__name",
        ),
        GRADE_COLUMNS,
    )
    frame["grade"] = pd.to_numeric(frame["grade"]).astype("float64")
    return frame


def imported_inconsistency_get(*, filters: VoteFilters, run_ids: list[int]) -> pd.DataFrame:
    """Per imported run (verdicts as a source published them), how many calls carry a verdict
    label and how many of those say "inconsistent"; one grouped count over those runs only.

    The imported runs are found first (a read of the runs table), so that a study without one
    reads none of its calls."""
    imported = list(
        JudgeRun.objects.filter(pk__in=run_ids, judge__kind=Judge.Kind.IMPORTED).values_list(
            "pk", flat=True
        )
    )
    if not imported:
        return _records([], ["run_id", "labelled", "inconsistent"])
    rows = (
        JudgeCall.objects.filter(pair_q(filters, "pair__"), run_id__in=imported)
        .exclude(verdict_label="")
        .values("run_id")
        .annotate(
            labelled=Count("id"),
            inconsistent=Count("id", filter=Q(verdict_label__icontains="inconsistent")),
        )
        .order_by("run_id")
        .values_list("run_id", "labelled", "inconsistent")
    )
    return _records(rows, ["run_id", "labelled", "inconsistent"])


# --- The reads a section declares (leaderboard.selectors.reads) -------------------------------


def _judgments(ctx: ReadContext) -> QuerySet[HumanJudgment]:
    """The judgments behind the report's people: the filtered pairs' judgments of its rater set,
    excluded participants left out (as the votes leave them out)."""
    read = HumanJudgment.objects.filter(
        pair_q(ctx.filters, "pair__"), study=ctx.study, excluded=False
    )
    if ctx.raters == "experts":
        read = read.filter(worker__external_id__startswith=EXPERT_PREFIX)
    return read


@dataclass(frozen=True)
class AnswerLengths:
    """The filtered pairs' answer lengths at the judged turn (:func:`report_lengths_get`):
    pair_id, answer_a_id, answer_b_id, len_a, len_b (NaN without text)."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        frame_hash_update(digest, "lengths", self.frame)


def lengths_read(ctx: ReadContext) -> AnswerLengths:
    return AnswerLengths(report_lengths_get(study=ctx.study, filters=ctx.filters))


@dataclass(frozen=True)
class CitedValues:
    """The judgments that cite any of the seven values: pair_id, rater, label, values."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        frame_hash_update(digest, "values", self.frame)


def values_read(ctx: ReadContext) -> CitedValues:
    judgments = _judgments(ctx).exclude(preference="").exclude(values=[])
    values = _records(
        judgments.order_by("pk").values_list("pair_id", "worker_id", "preference", "values"),
        ["pair_id", "rater", "label", "values"],
    )
    values["rater"] = "w" + values["rater"].astype(str)
    return CitedValues(values)


@dataclass(frozen=True)
class GoldAnswers:
    """The ranked or voted answers of the selected pairs' prompts (answers: answer_id,
    prompt_id, rank, upvotes, as floats) and the report's runs' scores of them (scores: run_id,
    answer_id, score)."""

    answers: pd.DataFrame
    scores: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        frame_hash_update(digest, "answers", self.answers)
        frame_hash_update(digest, "scores", self.scores)


def gold_answers_read(ctx: ReadContext) -> GoldAnswers:
    answers = _records(
        Answer.objects.filter(prompt__study=ctx.study)
        .filter(Q(rank__isnull=False) | Q(upvotes__isnull=False))
        .order_by("pk")
        .values_list("pk", "prompt_id", "rank", "upvotes"),
        ["answer_id", "prompt_id", "rank", "upvotes"],
    )
    scores = _records(
        AnswerScore.objects.filter(run_id__in=ctx.run_ids, answer__prompt__study=ctx.study)
        .order_by("run_id", "answer_id")
        .values_list("run_id", "answer_id", "score"),
        ["run_id", "answer_id", "score"],
    )
    return GoldAnswers(answers, scores)


def gold_answers_narrow(value: GoldAnswers, votes: StudyVotes) -> GoldAnswers:
    """Only the prompts of the selected pairs (filters apply to prompts through their pairs)."""
    import pandas as pd

    answers = value.answers
    answers = answers[answers["prompt_id"].isin(votes.pairs["prompt_id"].unique())]
    answers = answers.reset_index(drop=True)
    for column in ("rank", "upvotes"):
        answers[column] = pd.to_numeric(answers[column]).astype("float64")
    scores = value.scores
    scores = scores[scores["answer_id"].isin(answers["answer_id"])].reset_index(drop=True)
    return GoldAnswers(answers, scores)


@dataclass(frozen=True)
class ImportedInconsistency:
    """Per imported run, calls with a verdict as published and those marked "inconsistent"
    (:func:`imported_inconsistency_get`): run_id, labelled, inconsistent."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        frame_hash_update(digest, "inconsistent", self.frame)


def inconsistency_read(ctx: ReadContext) -> ImportedInconsistency:
    return ImportedInconsistency(
        imported_inconsistency_get(filters=ctx.filters, run_ids=list(ctx.run_ids))
    )


def consistency_read(ctx: ReadContext) -> ConsistencyInputs:
    return consistency_inputs_get(study=ctx.study, run_ids=list(ctx.run_ids))


@dataclass(frozen=True)
class StudyOrigin:
    """The study's follow-up origin (:func:`followup_origin_get`); None when it is no
    follow-up."""

    followup: FollowupOrigin | None

    def hash_update(self, digest: Hasher) -> None:
        if self.followup is not None:
            frame_hash_update(digest, "followup", self.followup.pairs)
            digest.update(self.followup.digest().encode())


def origin_read(ctx: ReadContext) -> StudyOrigin:
    return StudyOrigin(followup_origin_get(study=ctx.study))


@dataclass(frozen=True)
class PLSplits:
    """The training split of each PL run of the report (:func:`pl_splits_get`)."""

    splits: tuple[PLSplit, ...]

    def hash_update(self, digest: Hasher) -> None:
        for split in self.splits:
            digest.update(split.digest().encode())


def pl_splits_read(ctx: ReadContext) -> PLSplits:
    return PLSplits(pl_splits_get(study=ctx.study, run_ids=list(ctx.run_ids)))


@dataclass(frozen=True)
class AnswerRatings:
    """The judgments with per-answer ratings (acceptability, axes): pair_id, rater, label and a
    column per rating and side (:func:`leaderboard.selectors.ratings.ratings_frame`)."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        # Only when there are ratings, so that a study without them keeps the hash it had.
        if len(self.frame):
            frame_hash_update(digest, "ratings", self.frame)


def ratings_read(ctx: ReadContext) -> AnswerRatings:
    return AnswerRatings(ratings_frame(_judgments(ctx)))


@dataclass(frozen=True)
class AnswerStyles:
    """Per pair with texts on both sides, each answer's style counts at the judged turn
    (STYLE_COLUMNS: pair_id, tokens_a ... bold_b; :func:`report_styles_get`)."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        # Only when there are any (whenever the answers have text), as for the ratings.
        if len(self.frame):
            frame_hash_update(digest, "styles", self.frame)


def styles_read(ctx: ReadContext) -> AnswerStyles:
    return AnswerStyles(report_styles_get(study=ctx.study, filters=ctx.filters))


@dataclass(frozen=True)
class AnswerGrades:
    """A single-answer grading judge's grades of the selected pairs' answers (GRADE_COLUMNS;
    :func:`report_grades_get`)."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        if len(self.frame):
            frame_hash_update(digest, "grades", self.frame)


def grades_read(ctx: ReadContext) -> AnswerGrades:
    return AnswerGrades(
        report_grades_get(study=ctx.study, filters=ctx.filters, run_ids=list(ctx.run_ids))
    )


@dataclass(frozen=True)
class Propensities:
    """An active study's judgments with the propensity their assignment's draw recorded
    (PROPENSITY_COLUMNS: pair_id, rater, propensity); empty for a uniform study."""

    frame: pd.DataFrame

    def hash_update(self, digest: Hasher) -> None:
        if len(self.frame):
            frame_hash_update(digest, "propensities", self.frame)


def propensities_read(ctx: ReadContext) -> Propensities:
    judgments = _judgments(ctx).exclude(preference="")
    return Propensities(report_propensities_get(study=ctx.study, judgments=judgments))


@dataclass(frozen=True)
class SelectionCost:
    """What the selection cost: per judge run, its calls' summed cost and the pairs they judged
    (COST_COLUMNS), and the people's judgment pay (:func:`report_costs_get`)."""

    costs: pd.DataFrame
    pay: PeoplePay

    def hash_update(self, digest: Hasher) -> None:
        # Only when anything was paid.
        paid = self.pay.cents > 0
        if paid or (len(self.costs) and bool((self.costs["cost_usd"] > 0).any())):
            frame_hash_update(digest, "costs", self.costs)
            digest.update(self.pay.digest().encode())


def cost_read(ctx: ReadContext) -> SelectionCost:
    costs, pay = report_costs_get(
        study=ctx.study, filters=ctx.filters, judgments=_judgments(ctx), run_ids=list(ctx.run_ids)
    )
    return SelectionCost(costs, pay)


LENGTHS = Read("lengths", lengths_read, heavy=True)
VALUES = Read("values", values_read)
GOLD_ANSWERS = Read("gold_answers", gold_answers_read, narrow=gold_answers_narrow)
INCONSISTENCY = Read("inconsistency", inconsistency_read)
CONSISTENCY = Read("consistency", consistency_read)
ORIGIN = Read("origin", origin_read)
PL_SPLITS = Read("pl_splits", pl_splits_read)
ANSWER_RATINGS = Read("ratings", ratings_read)
STYLES = Read("styles", styles_read, heavy=True)
GRADES = Read("grades", grades_read)
PROPENSITIES = Read("propensities", propensities_read)
COST = Read("cost", cost_read)

# Every read a section may declare, in the order the report's data hash takes them (a new read
# goes last, so that the reports of studies it finds nothing in keep their hash).
READS: tuple[Read[Any], ...] = (
    LENGTHS,
    VALUES,
    GOLD_ANSWERS,
    INCONSISTENCY,
    CONSISTENCY,
    ORIGIN,
    PL_SPLITS,
    ANSWER_RATINGS,
    STYLES,
    GRADES,
    PROPENSITIES,
    COST,
)


def reads_get(
    *, reads: Sequence[Read[Any]], ctx: ReadContext, votes: Callable[[], StudyVotes]
) -> tuple[StudyVotes, dict[str, Any]]:
    """Read the votes (``votes``) and every one of ``reads`` at once: the votes, each heavy read
    and the light reads together each in a thread of their own, on connections of their own
    (one after another inside a transaction, :func:`leaderboard.parallel.run_parallel`); then
    each read's ``narrow`` with the votes. Return the votes and the values by read key."""
    heavy = [read for read in reads if read.heavy]
    light = [read for read in reads if not read.heavy]

    def one(read: Read[Any]) -> Callable[[], dict[str, Any]]:
        return lambda: {read.key: read.get(ctx)}

    def lights() -> dict[str, Any]:
        return {read.key: read.get(ctx) for read in light}

    got, *parts = run_parallel(votes, *map(one, heavy), lights, uses_database=True)
    raw: dict[str, Any] = {}
    for part in parts:
        raw |= part
    return got, {read.key: read.narrow(raw[read.key], got) for read in reads}


def reads_data_hash(values: Mapping[str, Any]) -> str:
    """SHA-256 of the reads' rows, each read feeding its own (``hash_update``), in the order of
    :data:`READS`."""
    digest = hashlib.sha256()
    for read in READS:
        if read.key in values:
            values[read.key].hash_update(digest)
    return digest.hexdigest()
