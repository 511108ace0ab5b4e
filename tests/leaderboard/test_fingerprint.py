"""The report's data fingerprint: every change a report would see changes it, and reading it
costs index steps, not a pass over the study's rows."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Answer, HumanJudgment, Pair, Study
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun
from leaderboard.selectors.snapshots import fingerprint_sql, study_data_fingerprint
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair, make_prompt_with_answers


@pytest.fixture
def judged(cast: Cast) -> tuple[Study, JudgeRun]:
    """One pair judged by a worker and by one judge (a finished call), plus one answer score."""
    study = cast.study
    pair = make_pair(study, "p1")
    assignment = make_assignment(pair, cast.worker_one)
    HumanJudgment.objects.create(
        study=study,
        pair=pair,
        worker=cast.worker_one,
        assignment=assignment,
        a_left=True,
        likert_shown=2,
        likert=2,
        preference="A",
    )
    judge = Judge.objects.create(name="fp judge", kind=Judge.Kind.LLM)
    run = JudgeRun.objects.create(judge=judge, study=study, status=JudgeRun.Status.DONE)
    JudgeCall.objects.create(
        run=run, pair=pair, order="ab", status="done", preference="A", finished_at=timezone.now()
    )
    AnswerScore.objects.create(run=run, answer=pair.answer_a, score=0.5)
    return study, run


def _pair_added(study: Study, run: JudgeRun, cast: Cast) -> None:
    make_pair(study, "p2")


def _judgment_added(study: Study, run: JudgeRun, cast: Cast) -> None:
    pair = Pair.objects.get(study=study)
    HumanJudgment.objects.create(
        study=study,
        pair=pair,
        worker=cast.worker_two,
        assignment=make_assignment(pair, cast.worker_two),
        a_left=True,
        likert_shown=7,
        likert=7,
        preference="B",
    )


def _judgment_deleted(study: Study, run: JudgeRun, cast: Cast) -> None:
    HumanJudgment.objects.filter(study=study).delete()


def _call_finished(study: Study, run: JudgeRun, cast: Cast) -> None:
    pair = Pair.objects.get(study=study)
    call = JudgeCall.objects.create(run=run, pair=pair, order="ba", status="pending")
    # A pending call is not read by the report, but its arrival may change the fingerprint;
    # what must change it is its finishing, measured from here.
    before = study_data_fingerprint(study=study)
    JudgeCall.objects.filter(pk=call.pk).update(
        status="done", preference="B", finished_at=timezone.now()
    )
    assert study_data_fingerprint(study=study) != before


def _call_deleted(study: Study, run: JudgeRun, cast: Cast) -> None:
    JudgeCall.objects.filter(run=run).delete()


def _run_status(study: Study, run: JudgeRun, cast: Cast) -> None:
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.CANCELLED)


def _worker_excluded(study: Study, run: JudgeRun, cast: Cast) -> None:
    type(cast.worker_one).objects.filter(pk=cast.worker_one.pk).update(
        excluded=True, excluded_at=timezone.now()
    )


def _score_deleted(study: Study, run: JudgeRun, cast: Cast) -> None:
    AnswerScore.objects.filter(run=run).delete()


def _answer_deleted_elsewhere(study: Study, run: JudgeRun, cast: Cast) -> None:
    # A deletion in another study counts too: the counters are global.
    _prompt, answers = make_prompt_with_answers(cast.other_study, "other")
    before = study_data_fingerprint(study=study)
    Answer.objects.filter(pk=answers[0].pk).delete()
    assert study_data_fingerprint(study=study) != before


CHANGES: dict[str, Callable[[Study, JudgeRun, Cast], None]] = {
    "a pair added": _pair_added,
    "a judgment added": _judgment_added,
    "a judgment deleted": _judgment_deleted,
    "a call finished": _call_finished,
    "a call deleted": _call_deleted,
    "a run's status changed": _run_status,
    "a worker excluded": _worker_excluded,
    "a score deleted": _score_deleted,
    "an answer deleted in another study": _answer_deleted_elsewhere,
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_every_change_a_report_would_see_changes_the_fingerprint(
    cast: Cast, judged: tuple[Study, JudgeRun], change: str
) -> None:
    study, run = judged
    before = study_data_fingerprint(study=study)
    assert study_data_fingerprint(study=study) == before
    CHANGES[change](study, run, cast)
    assert study_data_fingerprint(study=study) != before


def test_a_delete_that_removes_nothing_leaves_the_fingerprint(
    judged: tuple[Study, JudgeRun],
) -> None:
    study, _run = judged
    before = study_data_fingerprint(study=study)
    HumanJudgment.objects.filter(pk=-1).delete()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM judges_judgecall WHERE id = -1")
    assert study_data_fingerprint(study=study) == before


def test_the_fingerprint_counts_no_rows_of_the_study() -> None:
    """Counting is linear in the rows even through an index (1.4 s at 1M judgments + 2M calls,
    read on every page): only the excluded workers are counted; the rest are index steps."""
    sql = fingerprint_sql()
    assert re.findall(r"count\(\*\) FROM (\w+)", sql) == ["annotation_worker"]
    assert "run_id IN" not in sql.split("judges_judgecall")[1].split("FROM")[0]


def test_the_fingerprint_plan_reads_the_calls_through_the_run_indexes(
    judged: tuple[Study, JudgeRun],
) -> None:
    study, _run = judged
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + fingerprint_sql(), {"study": study.pk})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    calls = [line for line in plan.splitlines() if " on judges_judgecall" in line]
    assert calls and all("call_run_finished" in x or "call_run_id" in x for x in calls), plan


def test_each_runs_latest_call_is_its_own_whatever_the_runs_around_it(
    judged: tuple[Study, JudgeRun], cast: Cast
) -> None:
    # The latest call of a run is found by stepping back from (run, largest id) in the (run, id)
    # index: a later run without calls, or another study's runs, must not lend it theirs.
    study, run = judged
    pair = Pair.objects.get(study=study)
    judge = Judge.objects.create(name="fp judge 2", kind=Judge.Kind.LLM)
    # Run ids in order: this study's run, another study's, then this study's run without calls.
    other_run = JudgeRun.objects.create(judge=judge, study=cast.other_study)
    JudgeRun.objects.create(judge=judge, study=study, status=JudgeRun.Status.DONE)
    other_pair = make_pair(cast.other_study, "o1")
    before = study_data_fingerprint(study=study)

    JudgeCall.objects.create(run=other_run, pair=other_pair, order="ab", status="pending")
    assert study_data_fingerprint(study=study) == before
    JudgeCall.objects.create(run=run, pair=pair, order="ba", status="pending")
    assert study_data_fingerprint(study=study) != before
