"""The study list counts each kind of row once, in one query whatever the data's size."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Answer, HumanJudgment, Worker
from annotation.selectors.studies import study_list_with_counts
from tests.conftest import Cast
from tests.factories import make_pair


def test_study_counts_are_exact_and_cost_one_query(cast: Cast) -> None:
    pairs = [make_pair(cast.study, f"p{i}") for i in range(3)]
    raters = [
        Worker.objects.create(study=cast.study, panel=Worker.Panel.IMPORTED, external_id=f"r{i}")
        for i in range(4)
    ]
    for pair in pairs[:2]:
        for rater in raters:
            HumanJudgment.objects.create(
                study=cast.study, pair=pair, worker=rater, preference="A", is_imported=True
            )
    Answer.objects.filter(pk=pairs[0].answer_a_id).update(leak_flagged=True)

    with CaptureQueriesContext(connection) as queries:
        counts = ("prompt_count", "pair_count", "judgment_count", "flagged_count")
        rows = {
            study.slug: tuple(getattr(study, name) for name in counts)
            for study in study_list_with_counts(user=cast.admin)
        }
    assert len([q for q in queries if "annotation_study" in q["sql"]]) == 1
    assert rows[cast.study.slug] == (3, 3, 8, 1)
    assert rows[cast.other_study.slug] == (0, 0, 0, 0)
