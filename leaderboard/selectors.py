"""Reads for the analysis: a study's votes as long-format DataFrames, filtered.

Each frame is built from `values_list` over one table at a time (no per-row queries), then joined
in pandas on the pair id, so a million judgments cost a few column scans rather than a million
model instances.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System, Worker
from annotation.selectors.studies import study_list_with_counts
from judges.models import AnswerScore, JudgeCall, JudgeRun
from leaderboard.models import ExportJob, ReportSnapshot
from leaderboard.parallel import run_parallel

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
# The values of the text columns the report reads, sorted, as their Categorical's categories.
LABELS = ("A", "B", "tie")
CALL_ORDERS = ("ab", "ba", "both")
GOLD_SIDES = ("", "A", "B", "tie")
GOLD_KINDS = tuple(sorted(Pair.GoldKind.values))
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


def frame_read(
    qs: QuerySet[Model],
    fields: Sequence[str],
    columns: Sequence[str],
    *,
    text: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> pd.DataFrame:
    """Read `fields` of the queryset into a DataFrame with `columns`.

    On PostgreSQL the database writes the rows as one CSV text (`string_agg`) that pandas parses:
    an order of magnitude faster than a Python tuple, or a COPY message, per row for millions of
    rows (the text must stay under PostgreSQL's 1 GB limit, some 30 million rows). `text`
    columns come back as strings ("" for empty), `flags` as booleans (None when NULL).
    """
    rows = qs.order_by().values_list(*fields)
    try:
        sql, params = rows.query.sql_with_params()
    except EmptyResultSet:
        sql = ""
    if not sql or connection.vendor != "postgresql":
        frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
        for column in flags:
            frame[column] = frame[column].astype(object)
    else:
        aliases = [f"c{i}" for i in range(len(fields))]
        cells = [
            f"'\"' || replace(coalesce({alias}::text, ''), '\"', '\"\"') || '\"'"
            if name in text
            else f"coalesce({alias}::text, '')"
            for name, alias in zip(columns, aliases, strict=True)
        ]
        aggregate = (
            f"SELECT string_agg(concat_ws(',', {', '.join(cells)}), E'\\n') "
            f"FROM ({sql}) AS t({', '.join(aliases)})"
        )
        with connection.cursor() as cursor:
            cursor.execute(aggregate, params)
            csv_text = cursor.fetchone()[0] or ""
        # Text cells come back as Python strings already ("" for empty): no conversion.
        return _read_csv(csv_text, columns, text=text, flags=flags)
    for column in text:
        frame[column] = frame[column].fillna("").astype(str).astype(object)
    return frame


def frame_read_coded(
    qs: QuerySet[Model],
    fields: Sequence[str],
    columns: Sequence[str],
    *,
    choices: Mapping[str, Sequence[str]] | None = None,
    flags: Sequence[str] = (),
    small: Mapping[str, int] | None = None,
    top: str | None = None,
) -> pd.DataFrame:
    """Read numeric, boolean and choice fields of the queryset into a DataFrame with `columns`.

    Like :func:`frame_read`, but the database sends numbers only. A `choices` column (a text
    field whose values come from a fixed list) comes back as a pandas Categorical over those
    values (NaN for NULL), a `flags` column as booleans (None for NULL), a `small` column (an
    integer from 0 to the bound given) as a number; the other columns must be integer fields
    (ids, counts) and come back as int64, or float64 with NaN when some are NULL. A value outside
    its list or bound raises ValueError naming the column.

    On PostgreSQL each column travels as one binary string of big-endian 64-bit integers
    (``string_agg(int8send(...))``, fetched in binary format), which numpy reads as it is: the
    database turns no value into text and the client parses none. The choice, flag and small
    columns of a row are packed into one of those integers, each a digit of a mixed-radix number
    (0 for NULL); a NULL plain integer is sent as -2**63. `top` names one plain column that is
    never NULL nor negative (an id), sent as the most significant digit of that same integer, so
    that a row may travel as one number; NULL or a negative value there raises ValueError, and a
    value too large for the integer (above 2**63 over the product of the other digits' radices,
    some 10**15 for the report's reads) makes PostgreSQL refuse the query. A string stays under
    PostgreSQL's 1 GB limit up to some 130 million rows.
    """
    choices = choices or {}
    small = small or {}
    rows = qs.order_by().values_list(*fields)
    try:
        sql, params = rows.query.sql_with_params()
    except EmptyResultSet:
        sql = ""
    if sql and connection.vendor == "postgresql":
        aliases = dict(zip(columns, (f"c{i}" for i in range(len(fields))), strict=True))
        packed = [c for c in columns if c in choices or c in flags or c in small]
        on_top = top if packed and top is not None else None
        plain = [c for c in columns if c not in packed and c != on_top]
        digits, radices = [], []
        for name in packed:
            alias = aliases[name]
            if name in choices:
                whens = " ".join(
                    f"WHEN {alias} = {_sql_literal(v)} THEN {i + 1}"
                    for i, v in enumerate(choices[name])
                )
                radix = len(choices[name]) + 2
                digits.append(f"CASE WHEN {alias} IS NULL THEN 0 {whens} ELSE {radix - 1} END")
            elif name in flags:
                radix = 3
                digits.append(f"CASE WHEN {alias} IS NULL THEN 0 WHEN {alias} THEN 2 ELSE 1 END")
            else:
                radix = small[name] + 3
                digits.append(
                    f"CASE WHEN {alias} IS NULL THEN 0 WHEN {alias} BETWEEN 0 AND "
                    f"{small[name]} THEN {alias} + 1 ELSE {radix - 1} END"
                )
            radices.append(radix)
        multipliers = [math.prod(radices[:i]) for i in range(len(radices))]
        if math.prod(radices) >= 2**62:
            raise ValueError("too many packed columns for one 64-bit number")
        cells = [f"coalesce({aliases[name]}, {_NULL_INT_SQL})" for name in plain]
        if packed:
            terms = [f"({d})::bigint * {m}" for d, m in zip(digits, multipliers, strict=True)]
            if on_top is not None:
                terms.append(f"coalesce({aliases[on_top]}, -1)::bigint * {math.prod(radices)}")
            cells.append(" + ".join(terms))
        aggregate = (
            "SELECT "
            + ", ".join(f"string_agg(int8send({cell}), ''::bytea)" for cell in cells)
            + f" FROM ({sql}) AS t({', '.join(aliases.values())})"
        )
        numbers = [
            np.frombuffer(value or b"", dtype=">i8").astype(np.int64)
            for value in _fetch_binary_row(aggregate, params)
        ]
        raw = pd.DataFrame(
            {
                name: np.where(values == _NULL_INT, np.nan, values)
                if (values == _NULL_INT).any()
                else values
                for name, values in zip(plain, numbers[: len(plain)], strict=True)
            },
            index=pd.RangeIndex(len(numbers[0])),
        )
        rest = numbers[-1] if packed else None
        decoded: dict[str, Any] = {}
        for name, radix in zip(packed, radices, strict=True):
            assert rest is not None
            rest, digit = np.divmod(rest, radix)
            if (digit == radix - 1).any() and name not in flags:
                _raise_outside(qs, fields[list(columns).index(name)], name, choices, small)
            if name in choices:
                decoded[name] = pd.Categorical.from_codes(digit - 1, categories=list(choices[name]))
            elif name in flags:
                out = np.full(len(digit), None, dtype=object)
                out[digit == 2] = True
                out[digit == 1] = False
                decoded[name] = pd.Series(out, index=raw.index, dtype=object)
            else:
                value = digit - 1
                decoded[name] = (
                    np.where(digit == 0, np.nan, value.astype(np.float64))
                    if (digit == 0).any()
                    else value
                )
        if on_top is not None:
            assert rest is not None
            if (rest < 0).any():
                raise ValueError(f"column {on_top!r} holds NULL or a negative number")
            decoded[on_top] = rest
        return pd.DataFrame(
            {name: decoded[name] if name in decoded else raw[name].to_numpy() for name in columns},
            index=raw.index,
        )
    frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
    for name in choices:
        known = set(choices[name])
        present = frame[name].dropna()
        unknown = sorted(set(present.tolist()) - known)
        if unknown:
            raise ValueError(
                f"column {name!r} holds {unknown[0]!r}, not one of {list(choices[name])}"
            )
        frame[name] = pd.Categorical(frame[name], categories=list(choices[name]))
    for name, bound in small.items():
        values = pd.to_numeric(frame[name]).dropna()
        outside = values[(values < 0) | (values > bound)]
        if len(outside):
            raise ValueError(f"column {name!r} holds {outside.iloc[0]!r}, not from 0 to {bound}")
    for name in flags:
        frame[name] = frame[name].astype(object)
    for name in columns:
        if name not in choices and name not in flags and len(frame) == 0:
            frame[name] = frame[name].astype(np.int64)
    return frame


# A NULL plain integer column travels as the least 64-bit integer, which no id or count is.
_NULL_INT = -(2**63)
_NULL_INT_SQL = f"'{_NULL_INT}'::bigint"


def _fetch_binary_row(sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
    """The one row of an aggregate query, fetched in PostgreSQL's binary format, so that a
    bytea value arrives as its bytes rather than as hex text. Runs on the connection Django holds
    (so in its transaction), through a psycopg cursor that binds parameters on the server, as
    Django's client-side-binding cursors cannot fetch binary results."""
    import psycopg

    with connection.cursor() as wrapper, psycopg.Cursor(wrapper.cursor.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        row = cursor.fetchone()
    assert row is not None  # an aggregate without GROUP BY gives one row
    return tuple(row)


def _raise_outside(
    qs: QuerySet[Model],
    field: str,
    name: str,
    choices: Mapping[str, Sequence[str]],
    small: Mapping[str, int],
) -> None:
    rows = qs.order_by().exclude(**{f"{field}__isnull": True})
    if name in choices:
        found = rows.exclude(**{f"{field}__in": list(choices[name])})
        allowed = f"one of {list(choices[name])}"
    else:
        found = rows.filter(Q(**{f"{field}__lt": 0}) | Q(**{f"{field}__gt": small[name]}))
        allowed = f"from 0 to {small[name]}"
    value = found.values_list(field, flat=True).first()
    raise ValueError(f"column {name!r} holds {value!r}, not {allowed}")


def _sql_literal(value: str) -> str:
    """A choice value as an SQL string literal; choices are code constants, checked anyway."""
    if not all(ch.isalnum() or ch in "_- " for ch in value):
        raise ValueError(f"choice {value!r} is not a plain word")
    return f"'{value}'"


def _read_csv(
    csv_text: str, columns: Sequence[str], *, text: Sequence[str], flags: Sequence[str]
) -> pd.DataFrame:
    if not csv_text:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    frame = pd.read_csv(
        io.StringIO(csv_text),
        names=list(columns),
        header=None,
        # object, not str: pandas' str dtype would store them in Arrow and converting them back
        # to Python strings costs more than parsing them.
        dtype={c: object for c in text} | {c: object for c in flags},
        keep_default_na=False,
        na_values={c: [""] for c in columns if c not in text},
    )
    for column in flags:
        # Compared column-wise rather than mapped row by row; NULL stays None.
        values = frame[column].to_numpy(dtype=object)
        out = np.full(len(values), None, dtype=object)
        out[values == "true"] = True
        out[values == "false"] = False
        frame[column] = pd.Series(out, index=frame.index, dtype=object)
    return frame


def not_contrast_item(prefix: str = "") -> Q:
    """Leave out contrast items (docs/consistency.md): their two answers belong to two prompts,
    so they are no comparison of systems; only the consistency section reads them. On rows that
    point at a pair, an anti-join on the indexed `Pair.contrast` (no join on the pair)."""
    if not prefix:
        return Q(contrast__isnull=True)
    items = Pair.objects.filter(contrast__isnull=False).values("pk")
    return ~Q(**{f"{prefix.removesuffix('__')}_id__in": items})


def _pair_q(filters: VoteFilters, prefix: str = "") -> Q:
    """The filters as a condition on pairs, or on rows that point at a pair through `prefix`;
    contrast items are never among them."""
    q = not_contrast_item(prefix)
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
    qs = Pair.objects.filter(_pair_q(filters), study=study)
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
        choices={"gold_side": GOLD_SIDES, "gold_kind": GOLD_KINDS},
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


def positions_of(
    ids: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64], what: str
) -> npt.NDArray[np.intp]:
    """Each wanted id's position in the sorted `ids`; an id not there (a row pointing outside
    the study) raises ValueError naming it."""
    at = np.minimum(np.searchsorted(ids, wanted), max(len(ids) - 1, 0))
    missing = ids[at] != wanted if len(ids) else np.ones(len(wanted), dtype=bool)
    if missing.any():
        raise ValueError(f"{what} {int(wanted[missing][0])} is not one of the study's {what}s")
    return at


def _categorical(values: npt.NDArray[Any], at: npt.NDArray[np.intp]) -> pd.Categorical:
    """``values[at]`` as a Categorical whose categories are the distinct values, sorted."""
    categories, inverse = np.unique(values.astype(str), return_inverse=True)
    return pd.Categorical.from_codes(
        inverse.reshape(-1)[at] if len(at) else np.zeros(0, dtype=np.int64),
        categories=categories.astype(object),
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
        )
        for run in runs
    )


def _scores_as_float(frame: pd.DataFrame) -> pd.DataFrame:
    """Likert columns as floats with NaN for missing, so pandas aggregates them natively."""
    for column in ("likert", "likert_shown"):
        frame[column] = pd.to_numeric(frame[column]).astype("float64")
    return frame


def _human_frame(*, study: Study, filters: VoteFilters, raters: RaterSet) -> pd.DataFrame:
    # Judgments of excluded participants stay out of every analysis (annotation's worker_exclude).
    qs = HumanJudgment.objects.filter(
        _pair_q(filters, "pair__"), study=study, excluded=False
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
        categories=names[order],
    )
    # Sorted by judgment id (unique), so the same rows always come in the same order; read in
    # that order already as a rule (a table filled in order).
    if not frame["id"].is_monotonic_increasing:
        frame = frame.sort_values("id", kind="stable")
    return frame.reset_index(drop=True)


def _calls_frame(*, sources: Sequence[JudgeSource], filters: VoteFilters) -> pd.DataFrame:
    """The done calls of the sources' runs; for one run, the run is not read but filled in, so
    that a call travels as one number (its pair on top of its packed choices and scores)."""
    run_ids = [s.run_id for s in sources]
    qs = JudgeCall.objects.filter(
        _pair_q(filters, "pair__"), run_id__in=run_ids, status=JudgeCall.Status.DONE
    ).exclude(preference="")
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
    return calls, _combine_sorted(calls) if len(calls) else judge_votes_combine(calls)


def judge_votes_combine(calls: pd.DataFrame) -> pd.DataFrame:
    """One vote per (run, pair) from a judge's calls, as MT-Bench combines both orders.

    A verdict given on both orders at once (`both`) is the vote. Otherwise the A-first and
    B-first verdicts agree and give the vote, or disagree and give a tie ("inconsistent", as in
    Zheng et al. 2023); a pair judged in one order only takes that verdict. The canonical Likert
    vote is the mean of the orders' canonical scores when both have one.
    """
    if calls.empty:
        return pd.DataFrame(columns=["run_id", "pair_id", "label", "likert"])
    return _combine_sorted(calls_sort(calls))


def _combine_sorted(ordered: pd.DataFrame) -> pd.DataFrame:
    """:func:`judge_votes_combine` on calls already in :func:`calls_sort`'s order."""
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


def rows_of_run(frame: pd.DataFrame, run_id: int) -> pd.DataFrame:
    """The rows of one judge run: a slice when the frame is sorted by run (the votes' judges
    and calls are), else a selection."""
    runs = frame["run_id"].to_numpy()
    if len(runs) > 1 and (runs[1:] < runs[:-1]).any():
        return frame[runs == run_id]
    start, stop = np.searchsorted(runs, [run_id, run_id + 1])
    return frame.iloc[int(start) : int(stop)]


# The most parts the calls are read in at once, each on a database connection of its own.
_CALL_PARTS = 4


def study_votes_get(*, study: Study, filters: VoteFilters) -> StudyVotes:
    """Gather the study's votes for a report: people's and every selected judge run's."""
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
    combined["source"] = pd.Categorical.from_codes(run_codes[inverse.reshape(-1)], categories=names)
    combined["rater"] = combined["source"]
    # What was shown first, for position bias: only live calls in one order know it.
    human_cols = pairs.set_index("pair_id")
    human = human.join(human_cols, on="pair_id")
    human["source"] = pd.Categorical.from_codes(np.zeros(len(human), dtype=np.int64), ["human"])
    a_left = human["a_left"].to_numpy(dtype=object)
    human["shown_first"] = pd.Categorical.from_codes(
        np.where(a_left == True, 0, np.where(a_left == False, 1, -1)),  # noqa: E712
        categories=LABELS,
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


def votes_data_hash(*, votes: StudyVotes) -> str:
    """SHA-256 of the rows a report is computed from, in a fixed order, as
    :func:`frame_hash_update` writes them."""
    digest = hashlib.sha256()
    for name, frame in (
        ("pairs", votes.pairs),
        ("human", votes.human),
        ("calls", votes.calls),
    ):
        frame_hash_update(digest, name, frame)
    return digest.hexdigest()


def frame_hash_update(digest: Any, name: str, frame: pd.DataFrame) -> None:
    """Feed `digest` a frame's name, columns and length, then each column's values in row order,
    as bytes that differ whenever the values do.

    Integers go as little-endian 64-bit integers, floats as 64-bit floats (every NaN as one
    pattern), booleans as one byte each, a Categorical as its categories (JSON) and each row's
    code (32-bit), anything else as the JSON text of its values. Each column is preceded by its
    name and encoding. Numbers are hashed as they lie in memory, so hashing a million rows takes
    a few milliseconds per column.
    """
    digest.update(f"[{name}:{len(frame)}]".encode())
    for column in frame.columns:
        values = frame[column]
        dtype = values.dtype
        data: bytes
        if isinstance(dtype, pd.CategoricalDtype):
            encoding = "category " + json.dumps([str(c) for c in dtype.categories])
            data = values.cat.codes.to_numpy().astype("<i4").tobytes()
        elif isinstance(dtype, np.dtype) and dtype.kind == "b":
            encoding, data = "bool", values.to_numpy().astype(np.uint8).tobytes()
        elif isinstance(dtype, np.dtype) and dtype.kind in "iu":
            encoding, data = "int", values.to_numpy().astype("<i8").tobytes()
        elif isinstance(dtype, np.dtype) and dtype.kind == "f":
            floats = values.to_numpy().astype("<f8")
            encoding, data = "float", np.where(np.isnan(floats), np.nan, floats).tobytes()
        else:
            encoding = "json"
            data = json.dumps(values.tolist(), default=str, ensure_ascii=False).encode()
        digest.update(f"{{{column}:{encoding}}}".encode())
        digest.update(data)


def study_data_fingerprint(*, study: Study) -> str:
    """A cheap fingerprint of everything a report of the study reads: SHA-256 of counts and
    largest ids (and times) of its pairs, answers, workers excluded, judgments, judge runs (with
    their statuses), finished judge calls and answer scores, in one statement of index lookups.

    A row added, deleted, finished or excluded changes it; so does a run changing status. Rows
    edited in place without any of those (an answer's text changed in the admin) do not: ask for
    a recompute on the page for those.
    """
    tables = {
        "pair": Pair._meta.db_table,
        "answer": Answer._meta.db_table,
        "prompt": Prompt._meta.db_table,
        "worker": Worker._meta.db_table,
        "judgment": HumanJudgment._meta.db_table,
        "run": JudgeRun._meta.db_table,
        "call": JudgeCall._meta.db_table,
        "score": AnswerScore._meta.db_table,
    }
    runs = f"SELECT id FROM {tables['run']} WHERE study_id = %(study)s"
    sql = f"""
        SELECT
          (SELECT count(*) FROM {tables["pair"]} WHERE study_id = %(study)s),
          (SELECT max(id) FROM {tables["pair"]} WHERE study_id = %(study)s),
          (SELECT count(*) FROM {tables["answer"]} a JOIN {tables["prompt"]} p
             ON p.id = a.prompt_id WHERE p.study_id = %(study)s),
          (SELECT max(a.id) FROM {tables["answer"]} a JOIN {tables["prompt"]} p
             ON p.id = a.prompt_id WHERE p.study_id = %(study)s),
          (SELECT count(*) FROM {tables["worker"]} WHERE study_id = %(study)s AND excluded),
          (SELECT max(excluded_at) FROM {tables["worker"]} WHERE study_id = %(study)s),
          (SELECT count(*) FROM {tables["judgment"]} WHERE study_id = %(study)s),
          (SELECT max(id) FROM {tables["judgment"]} WHERE study_id = %(study)s),
          (SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM {tables["run"]}
             WHERE study_id = %(study)s),
          (SELECT count(*) FROM {tables["call"]} WHERE run_id IN ({runs}) AND status = 'done'),
          (SELECT max(id) FROM {tables["call"]} WHERE run_id IN ({runs})),
          (SELECT max(finished_at) FROM {tables["call"]} WHERE run_id IN ({runs})),
          (SELECT count(*) FROM {tables["score"]} WHERE run_id IN ({runs})),
          (SELECT max(id) FROM {tables["score"]} WHERE run_id IN ({runs}))
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"study": study.pk})
        row = cursor.fetchone()
    text = "|".join("" if value is None else str(value) for value in row)
    return hashlib.sha256(text.encode()).hexdigest()


def report_snapshot_get(
    *, study: Study, params_hash: str, code_version: str
) -> ReportSnapshot | None:
    """The snapshot of this key, computed or not, if one exists."""
    return ReportSnapshot.objects.filter(
        study=study,
        kind=ReportSnapshot.Kind.AGREEMENT,
        params_hash=params_hash,
        code_version=code_version,
    ).first()


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


EXPORT_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    # table: ((ORM field, column name), ...); each column's type is its model field's.
    "pairs": (
        ("id", "pair_id"),
        ("prompt__external_id", "prompt"),
        ("prompt__category", "category"),
        ("turn", "turn"),
        ("answer_a_id", "answer_a_id"),
        ("answer_a__system__name", "system_a"),
        ("answer_b_id", "answer_b_id"),
        ("answer_b__system__name", "system_b"),
        ("source", "source"),
        ("is_gold", "is_gold"),
        ("gold_side", "gold_side"),
        ("gold_kind", "gold_kind"),
    ),
    "judgments": (
        ("id", "judgment_id"),
        ("pair_id", "pair_id"),
        ("pair__prompt__external_id", "prompt"),
        ("pair__turn", "turn"),
        ("worker__panel", "panel"),
        ("worker__external_id", "rater"),
        ("is_imported", "is_imported"),
        ("a_left", "a_left"),
        ("likert_shown", "likert_shown"),
        ("likert", "likert"),
        ("preference", "preference"),
        ("values", "values"),
        ("reason", "reason"),
        ("comment", "comment"),
        ("duration_ms", "duration_ms"),
        ("created_at", "created_at"),
    ),
    "calls": (
        ("id", "call_id"),
        ("run_id", "run_id"),
        ("run__judge__name", "judge"),
        ("pair_id", "pair_id"),
        ("order", "order"),
        ("status", "status"),
        ("likert_shown", "likert_shown"),
        ("likert", "likert"),
        ("preference", "preference"),
        ("verdict_label", "verdict_label"),
        ("score_a", "score_a"),
        ("score_b", "score_b"),
        ("parse_error", "parse_error"),
        ("refusal", "refusal"),
        ("tokens_in", "tokens_in"),
        ("tokens_out", "tokens_out"),
        ("cost_usd", "cost_usd"),
        ("latency_ms", "latency_ms"),
        ("model_version_reported", "model_version_reported"),
        ("raw_output", "raw_output"),
    ),
}


def study_export_queryset(*, study: Study, table: str) -> QuerySet[Any]:
    """The rows of one export table of the study (pairs, judgments or calls), unordered."""
    if table not in EXPORT_TABLES:
        raise ValueError(f"table must be one of {sorted(EXPORT_TABLES)}, not {table!r}")
    if table == "pairs":
        return Pair.objects.filter(study=study)
    if table == "judgments":
        return HumanJudgment.objects.filter(study=study)
    return JudgeCall.objects.filter(run__study=study)


def study_export_count(*, study: Study, table: str) -> int:
    """How many rows an export of one table of the study holds."""
    return int(study_export_queryset(study=study, table=table).count())


def api_schema_get(*, request: HttpRequest) -> list[dict[str, Any]]:
    """The analysis API's operations from its OpenAPI schema: path, method, summary, params."""
    from rest_framework.schemas.openapi import SchemaGenerator

    generator = SchemaGenerator(
        title="Concord analysis API", urlconf="leaderboard.api_urls", url="/api/v1/"
    )
    schema = generator.get_schema(request=None, public=True) or {}
    operations = []
    for path, methods in sorted(schema.get("paths", {}).items()):
        for method, operation in sorted(methods.items()):
            operations.append(
                {
                    "path": path,
                    "method": method.upper(),
                    "summary": operation.get("description", ""),
                    "parameters": [p.get("name") for p in operation.get("parameters", [])],
                }
            )
    return operations


def api_study_list(*, user: User | AnonymousUser) -> QuerySet[Study]:
    """The studies the user may read, with their counts, by slug."""
    return study_list_with_counts(user=user).order_by("slug")


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
    *, votes: StudyVotes, judge: str | None = None, disagree: bool = False
) -> list[UnitRow]:
    """The units behind a report cell: every unit with votes, or with `judge` and `disagree`,
    those where that judge's vote differs from the people's majority label (a tied majority is
    a tie, as in the report's majority level)."""
    human = votes.human
    counts = human.groupby(["pair_id", "label"]).size().unstack("label", fill_value=0)
    counts = counts.reindex(columns=["A", "B", "tie"], fill_value=0)
    values = counts.to_numpy()
    top = values.max(axis=1, keepdims=True) if len(values) else values
    unique = (values == top).sum(axis=1) == 1 if len(values) else []
    majority = pd.Series(
        [
            ("A", "B", "tie")[int(row.argmax())] if is_unique else "tie"
            for row, is_unique in zip(values, unique, strict=True)
        ],
        index=counts.index,
        dtype=object,
    )
    judge_votes = {
        source: votes.judges[votes.judges["source"] == source].set_index("pair_id")["label"]
        for source in sorted(set(votes.judges["source"].tolist()))
    }
    units = votes.pairs.set_index("pair_id")
    wanted = units.index.intersection(counts.index.union(votes.judges["pair_id"].unique()))
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
        HumanJudgment.objects.filter(pair=pair).select_related("worker").order_by("pk")
    )
    calls = list(JudgeCall.objects.filter(pair=pair).select_related("run__judge").order_by("pk"))
    return {"pair": pair, "judgments": judgments, "calls": calls}


def export_jobs_for_study(*, study: Study) -> QuerySet[ExportJob]:
    """The study's export jobs, newest first, with who asked for them."""
    return ExportJob.objects.filter(study=study).select_related("requested_by")


def export_job_get(*, study: Study, public_id: Any) -> ExportJob:
    """The study's export job with this public id (ExportJob.DoesNotExist otherwise)."""
    return ExportJob.objects.get(study=study, public_id=public_id)
