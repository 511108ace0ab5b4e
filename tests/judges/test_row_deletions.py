"""judges.models.RowDeletions reads the rows that judges/sql/judges_count_deletions.sql keeps: one
per judges table the report's fingerprint reads, counting DELETE statements that removed rows."""

from __future__ import annotations

import pytest
from django.utils import timezone

from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun, RowDeletions
from tests.conftest import Cast
from tests.factories import make_pair

pytestmark = pytest.mark.django_db


def _counts() -> dict[str, int]:
    # Rows a committed test left behind are not flushed (the table is not Django's).
    return dict(RowDeletions.objects.values_list("table_name", "deletions"))


def test_deleted_calls_and_scores_are_counted_per_statement(cast: Cast) -> None:
    pair = make_pair(cast.study)
    run = JudgeRun.objects.create(
        judge=Judge.objects.create(name="counted", kind=Judge.Kind.LLM), study=cast.study
    )
    for order in ("ab", "ba"):
        JudgeCall.objects.create(run=run, pair=pair, order=order, finished_at=timezone.now())
    AnswerScore.objects.create(run=run, answer=pair.answer_a, score=0.5)
    before = _counts()

    JudgeCall.objects.filter(run=run).delete()
    JudgeCall.objects.filter(run=run).delete()
    AnswerScore.objects.filter(run=run).delete()

    after = _counts()
    assert after["judges_judgecall"] == before.get("judges_judgecall", 0) + 1
    assert after["judges_answerscore"] == before.get("judges_answerscore", 0) + 1
    assert set(after) - set(before) <= {"judges_judgecall", "judges_answerscore"}
