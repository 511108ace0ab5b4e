"""Reads for the exports: the export tables and their rows, and the study's export jobs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from annotation.models import HumanJudgment, Pair, Study
from judges.models import JudgeCall
from leaderboard.models import ExportJob
from leaderboard.selectors.ratings import RATING_COLUMNS, judgments_with_ratings

# Computed columns of the export tables (annotations of the table's queryset), all text.
EXPORT_COMPUTED: frozenset[str] = frozenset(f"rating_{name}" for name in RATING_COLUMNS)

EXPORT_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    # table: ((ORM field, column name), ...); each column's type is its model field's (a
    # computed column of EXPORT_COMPUTED is text).
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
        # The per-answer ratings, last so that readers by position keep their columns.
        *((f"rating_{name}", name) for name in RATING_COLUMNS),
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
        # A single-answer grading judge's grade calls (pair_id empty), last so that readers by
        # position keep their columns; `turn` is the turn every call judged (a pair call's is
        # its pair's turn unless its judge judged every turn, judges.services.turns).
        ("answer_id", "answer_id"),
        ("turn", "turn"),
        ("grade", "grade"),
    ),
}


def study_export_queryset(*, study: Study, table: str) -> QuerySet[Any]:
    """The rows of one export table of the study (pairs, judgments or calls), unordered.

    The judgments are those the report reads: a participant's judgments leave the export when
    they are excluded (annotation's worker_exclude), as they leave every analysis.
    """
    if table not in EXPORT_TABLES:
        raise ValueError(f"table must be one of {sorted(EXPORT_TABLES)}, not {table!r}")
    if table == "pairs":
        return Pair.objects.filter(study=study)
    if table == "judgments":
        return judgments_with_ratings(HumanJudgment.objects.filter(study=study, excluded=False))
    return JudgeCall.objects.filter(run__study=study)


def study_export_count(*, study: Study, table: str) -> int:
    """How many rows an export of one table of the study holds."""
    return int(study_export_queryset(study=study, table=table).count())


def export_jobs_for_study(*, study: Study) -> QuerySet[ExportJob]:
    """The study's export jobs, newest first, with who asked for them."""
    return ExportJob.objects.filter(study=study).select_related("requested_by")


def export_job_get(*, study: Study, public_id: Any) -> ExportJob:
    """The study's export job with this public id (ExportJob.DoesNotExist otherwise)."""
    return ExportJob.objects.get(study=study, public_id=public_id)
