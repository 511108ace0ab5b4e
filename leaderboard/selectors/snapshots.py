"""What a report snapshot is keyed and checked by: the hash of the rows a report is computed from,
the cheap fingerprint of a study's data that says whether a snapshot is current, and the snapshot
of one key."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection

from annotation.models import Answer, HumanJudgment, Pair, Study, System, Worker
from annotation.models import RowDeletions as AnnotationRowDeletions
from judges.models import AnswerScore, ContrastScoring, JudgeCall, JudgeRun, ReferenceCall
from judges.models import RowDeletions as JudgesRowDeletions
from leaderboard.models import ReportSnapshot
from leaderboard.selectors.frames import StudyVotes

if TYPE_CHECKING:
    import pandas as pd


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
    import pandas as pd

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


# Larger than any id: the upper end of a (parent, id) range in a row comparison.
_ID_MAX = 2**63 - 1


def latest_child_sql(table: str, parent_column: str, parent: str) -> str:
    """The largest id of `table`'s rows whose `parent_column` equals `parent` (an SQL expression
    of the enclosing query), or NULL: one backward step of the (parent_column, id) index.

    A plain max(id) WHERE parent_column = parent may be planned as a backward walk of the
    primary key that skips every later parent's rows (260 ms for a run followed by 1M calls; 29
    ms to find a study's latest judgment behind five small studies): the row comparison and
    order below can only be served by the (parent_column, id) index, and the CASE takes a row
    of an earlier parent, the first one the step finds when the parent has none, as "no row"."""
    return f"""(SELECT CASE WHEN t.{parent_column} = {parent} THEN t.id END FROM {table} t
            WHERE (t.{parent_column}, t.id) <= ({parent}, {_ID_MAX})
            ORDER BY t.{parent_column} DESC, t.id DESC LIMIT 1)"""


def fingerprint_sql() -> str:
    """The fingerprint's one statement (parameter: %(study)s); see study_data_fingerprint."""
    tables = {
        "pair": Pair._meta.db_table,
        "answer": Answer._meta.db_table,
        "system": System._meta.db_table,
        "worker": Worker._meta.db_table,
        "judgment": HumanJudgment._meta.db_table,
        "run": JudgeRun._meta.db_table,
        "call": JudgeCall._meta.db_table,
        "score": AnswerScore._meta.db_table,
        "reference": ReferenceCall._meta.db_table,
        "contrast_scoring": ContrastScoring._meta.db_table,
    }
    deleted = {
        name: f"(SELECT deletions FROM {counters._meta.db_table} "
        f"WHERE table_name = '{tables[name]}')"
        for name, counters in (
            ("pair", AnnotationRowDeletions),
            ("answer", AnnotationRowDeletions),
            ("judgment", AnnotationRowDeletions),
            ("call", JudgesRowDeletions),
            ("score", JudgesRowDeletions),
        )
    }

    def per_parent(latest: str, parent: str) -> str:
        # The largest of one value per run (or system) of the study: one index step each.
        alias = "r" if parent == "run" else "s"
        return f"""(SELECT max(last) FROM (SELECT ({latest}) AS last
            FROM {tables[parent]} {alias} WHERE {alias}.study_id = %(study)s) AS per_parent)"""

    # Answers have no study: an answer belongs to the study of its system (the importers make
    # both from the study's file), so its latest is the latest of each system's.
    latest_answer = per_parent(latest_child_sql(tables["answer"], "system_id", "s.id"), "system")
    latest_call = per_parent(latest_child_sql(tables["call"], "run_id", "r.id"), "run")
    latest_finished = per_parent(
        f"SELECT max(c.finished_at) FROM {tables['call']} c WHERE c.run_id = r.id", "run"
    )
    latest_score = per_parent(latest_child_sql(tables["score"], "run_id", "r.id"), "run")
    # max(excluded_at) over the study's workers, as two backward steps of worker_study_excluded
    # (a max over a leading (study, excluded) prefix is not one step).
    latest_exclusion = ", ".join(
        f"""(SELECT max(excluded_at) FROM {tables["worker"]}
             WHERE study_id = %(study)s AND {flag})"""
        for flag in ("excluded", "NOT excluded")
    )

    # The PL runs' done contrast scorings (judges.reward.contrast), what the consistency
    # section reads: a few rows per run, listed by id, so a scoring that is stored (done), or
    # deleted with its run or its contrast set, changes the text; no deletion counter needed.
    # A pending, running or failed scoring is not read by the report, so it changes nothing.
    contrast_scorings = f"""(SELECT string_agg(c.id::text, ',' ORDER BY c.id)
        FROM {tables["run"]} r JOIN {tables["contrast_scoring"]} c ON c.run_id = r.id
        WHERE r.study_id = %(study)s AND c.status = 'done')"""

    return f"""
        SELECT
          {latest_child_sql(tables["pair"], "study_id", "%(study)s")},
          {deleted["pair"]},
          {latest_answer},
          {deleted["answer"]},
          (SELECT count(*) FROM {tables["worker"]} WHERE study_id = %(study)s AND excluded),
          GREATEST({latest_exclusion}),
          {latest_child_sql(tables["judgment"], "study_id", "%(study)s")},
          {deleted["judgment"]},
          (SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM {tables["run"]}
             WHERE study_id = %(study)s),
          {latest_call},
          {latest_finished},
          {deleted["call"]},
          {latest_score},
          {deleted["score"]},
          {latest_child_sql(tables["reference"], "study_id", "%(study)s")},
          (SELECT max(finished_at) FROM {tables["reference"]} WHERE study_id = %(study)s),
          {contrast_scorings}
    """


def study_data_fingerprint(*, study: Study) -> str:
    """A cheap fingerprint of everything a report of the study reads: SHA-256 of the largest ids
    of its pairs, answers, judgments, judge calls and answer scores, each run's latest finished
    call, its runs with their statuses, its excluded workers, the deletion counters of those
    tables, and its reference ledger's latest row and latest finished row (a reference written,
    or its request paid, changes what reference-guided judges cost), and its PL runs' done contrast
    scorings (a scoring stored changes the consistency section), in one
    statement of index lookups that does not grow with the study.

    A row added, finished or excluded changes it; so does a run changing status, and a row
    deleted anywhere (the counters are kept by statement-level triggers, see
    annotation/sql/annotation_count_deletions.sql; global, so a deletion in another study marks
    this one changed too). Rows edited in place without any of those (an answer's text changed
    in the admin) do not: ask for a recompute on the page for those.
    """
    with connection.cursor() as cursor:
        cursor.execute(fingerprint_sql(), {"study": study.pk})
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
