"""The deletion counters the report's fingerprint reads are models: annotation.models.RowDeletions
reads the rows that annotation/sql/annotation_count_deletions.sql keeps, one per table, counting
DELETE statements that removed rows (not rows)."""

from __future__ import annotations

import pytest

from annotation.models import Answer, HumanJudgment, Pair, RowDeletions
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair

pytestmark = pytest.mark.django_db


def _counts() -> dict[str, int]:
    # Rows a committed test left behind are not flushed (the table is not Django's), so each
    # test compares against what it found.
    return dict(RowDeletions.objects.values_list("table_name", "deletions"))


def _added(before: dict[str, int]) -> dict[str, int]:
    after = _counts()
    added = {name: count - before.get(name, 0) for name, count in after.items()}
    return {name: count for name, count in added.items() if count}


def test_each_delete_statement_that_removes_pairs_counts_once(cast: Cast) -> None:
    pairs = [make_pair(cast.study, f"p{index}") for index in range(3)]
    before = _counts()
    Pair.objects.filter(pk__in=[pairs[0].pk, pairs[1].pk]).delete()
    assert _added(before) == {"annotation_pair": 1}
    Pair.objects.filter(pk=pairs[2].pk).delete()
    assert _added(before) == {"annotation_pair": 2}
    row = RowDeletions.objects.get(table_name="annotation_pair")
    assert row.deletions == before.get("annotation_pair", 0) + 2
    assert str(row) == f"annotation_pair: {row.deletions} deletions"


def test_a_delete_that_removes_nothing_is_not_counted(cast: Cast) -> None:
    make_pair(cast.study)
    before = _counts()
    Pair.objects.filter(pk=-1).delete()
    HumanJudgment.objects.filter(pk=-1).delete()
    assert _added(before) == {}


def test_an_answer_deleted_counts_its_table_and_the_pairs_and_judgments_it_took_along(
    cast: Cast,
) -> None:
    pair = make_pair(cast.study)
    HumanJudgment.objects.create(
        study=cast.study,
        pair=pair,
        worker=cast.worker_one,
        assignment=make_assignment(pair, cast.worker_one),
        a_left=True,
        likert_shown=2,
        likert=2,
        preference="A",
    )
    before = _counts()
    Answer.objects.filter(pk=pair.answer_a_id).delete()
    assert _added(before) == {
        "annotation_answer": 1,
        "annotation_pair": 1,
        "annotation_humanjudgment": 1,
    }
