"""The report's data fingerprint: every change a report would see changes it, and reading it
costs index steps, not a pass over the study's rows nor over other studies' rows."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Answer, HumanJudgment, Pair, Study, System, Worker
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun, ReferenceCall
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


def _answer_added(study: Study, run: JudgeRun, cast: Cast) -> None:
    # A new system's answer to an existing prompt: no prompt is added.
    pair = Pair.objects.get(study=study)
    system = System.objects.create(study=study, name="late system", version="1")
    Answer.objects.create(prompt=pair.prompt, system=system, turns=["late"])


def _score_added(study: Study, run: JudgeRun, cast: Cast) -> None:
    AnswerScore.objects.create(run=run, answer=Pair.objects.get(study=study).answer_b, score=0.1)


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


def _reference_written(study: Study, run: JudgeRun, cast: Cast) -> None:
    # A reference judge's request (judges.models.ReferenceCall): its arrival, then its reply
    # and cost, each change what a reference-guided judge costs in the report.
    pair = Pair.objects.get(study=study)
    call = ReferenceCall.objects.create(
        study=study, prompt=pair.prompt, judge=run.judge, idempotency_key="fp-ref"
    )
    before = study_data_fingerprint(study=study)
    ReferenceCall.objects.filter(pk=call.pk).update(
        status="done", reply="42", cost_usd="0.01", finished_at=timezone.now()
    )
    assert study_data_fingerprint(study=study) != before


CHANGES: dict[str, Callable[[Study, JudgeRun, Cast], None]] = {
    "a reference written": _reference_written,
    "a pair added": _pair_added,
    "an answer added": _answer_added,
    "a score added": _score_added,
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


# The indexes each large table may be read through; never its primary key (a backward walk of
# it skips every later study's rows) and never a sequential scan. A study's workers may be
# counted through either index that leads with the study (the planner's choice on a tiny table).
FINGERPRINT_INDEXES = {
    "annotation_pair": {"pair_study_id"},
    "annotation_answer": {"answer_system_id"},
    "annotation_humanjudgment": {"judgment_study_id"},
    "annotation_worker": {"worker_study_excluded", "worker_unique_external_id"},
    # Any index that leads with the run is one step per run. Which of them the planner takes
    # depends on the table's statistics: after earlier tests wrote and rolled back hundreds of
    # calls (tests/judges/reward), an unanalysed table can send it to call_run_status or to the
    # foreign key's own index; at scale the buffers test below checks the read stays small.
    "judges_judgecall": {
        "call_run_id",
        "call_run_finished",
        "call_run_status",
        "judges_judgecall_run_id_826ba70d",
    },
    "judges_answerscore": {"score_run_id"},
    "judges_referencecall": {"reference_call_study_id", "reference_call_study_finished"},
    "judges_contrastscoring": {"contrast_scoring_unique"},
}


def _fingerprint_plan(study: Study, *, analyze: bool = False) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        options = "(ANALYZE, BUFFERS, COSTS OFF, TIMING OFF)" if analyze else "(COSTS OFF)"
        cursor.execute(f"EXPLAIN {options} " + fingerprint_sql(), {"study": study.pk})
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_fingerprint_plan_reads_each_large_table_through_its_study_index(
    judged: tuple[Study, JudgeRun],
) -> None:
    study, _run = judged
    plan = _fingerprint_plan(study)
    for table, indexes in FINGERPRINT_INDEXES.items():
        reads = [x.strip().removeprefix("->  ") for x in plan.splitlines() if f" on {table}" in x]
        assert reads, (table, plan)
        for read in reads:
            assert read.startswith(("Index Scan", "Index Only Scan")), (table, read)
            assert read.split(" using ")[1].split(" ")[0] in indexes, (table, read)


def _study_filled(study: Study, *, prompts: int) -> None:
    """Give `study` `prompts` prompts x 10 systems' answers, every pair of them, two judgments
    per pair, a judge run calling each pair in both orders and scoring every answer (ids after
    every row already there); then ANALYZE, as autovacuum would."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH s AS (
              INSERT INTO annotation_system (study_id, name, version, decoding, created_at)
              SELECT %(study)s, 'filler-' || i, 'f', '{}', now() FROM generate_series(1, 10) i
              RETURNING id),
            p AS (
              INSERT INTO annotation_prompt (study_id, external_id, category, turns, created_at)
              SELECT %(study)s, 'filler-' || i, 'writing', '["Q"]', now()
              FROM generate_series(1, %(prompts)s) i RETURNING id)
            INSERT INTO annotation_answer (prompt_id, system_id, turns, leak_matches,
                                           leak_flagged, leak_remedy, leak_note, created_at)
            SELECT p.id, s.id, '["A"]', '[]', false, '', '', now() FROM p CROSS JOIN s
            """,
            {"study": study.pk, "prompts": prompts},
        )
        cursor.execute(
            """
            INSERT INTO annotation_pair (study_id, prompt_id, answer_a_id, answer_b_id, turn,
              source, is_gold, gold_side, gold_kind, rationale_winner, shuffle_key, created_at)
            SELECT %(study)s, a.prompt_id, a.id, b.id, 1, 'all_pairs', false, '', '', '',
                   random(), now()
            FROM annotation_answer a JOIN annotation_answer b
              ON b.prompt_id = a.prompt_id AND a.id < b.id
            JOIN annotation_prompt p ON p.id = a.prompt_id AND p.study_id = %(study)s
              AND p.external_id LIKE 'filler-%%'
            """,
            {"study": study.pk},
        )
        worker = Worker.objects.create(study=study, panel="imported", external_id="filler")
        judge = Judge.objects.create(name=f"filler judge {study.pk}", kind=Judge.Kind.LLM)
        cursor.execute(
            """
            INSERT INTO annotation_humanjudgment (study_id, pair_id, worker_id, is_imported,
              a_left, likert_shown, likert, preference, values, reason, acceptability_a,
              acceptability_b, axes, comment, excluded, created_at)
            SELECT %(study)s, p.id, %(worker)s, true, true, 2, 2, 'A', '[]', '', '', '', '{}',
                   '', false, now()
            FROM annotation_pair p CROSS JOIN generate_series(1, 2)
            WHERE p.study_id = %(study)s AND p.source = 'all_pairs'
            """,
            {"study": study.pk, "worker": worker.pk},
        )
        run = JudgeRun.objects.create(judge=judge, study=study, status=JudgeRun.Status.DONE)
        cursor.execute(
            """
            INSERT INTO judges_judgecall (run_id, pair_id, "order", status, request, raw_output,
              preference, verdict_label, values, parse_error, refusal, error, tokens_in,
              tokens_out, cost_usd, model_version_reported, attempts, lease_token,
              unrecorded_requests, attempt_errors, finished_at, created_at)
            SELECT %(run)s, p.id, o, 'done', '{}', '', 'A', '', '[]', '', false, '', 0,
                   0, 0, '', 1, '', 0, '[]', now(), now()
            FROM annotation_pair p CROSS JOIN (VALUES ('ab'), ('ba')) AS orders(o)
            WHERE p.study_id = %(study)s AND p.source = 'all_pairs'
            """,
            {"study": study.pk, "run": run.pk},
        )
        cursor.execute(
            """
            INSERT INTO judges_answerscore (run_id, answer_id, score, created_at)
            SELECT %(run)s, a.id, 0.5, now() FROM annotation_answer a
            JOIN annotation_system s ON s.id = a.system_id AND s.study_id = %(study)s
              AND s.name LIKE 'filler-%%'
            """,
            {"study": study.pk, "run": run.pk},
        )
        for table in FINGERPRINT_INDEXES:
            cursor.execute(f"ANALYZE {table}")


def _buffers(plan: str) -> int:
    """The pages the statement touched: its top line's shared hits and reads."""
    line = next(x for x in plan.splitlines() if "Buffers:" in x)
    return sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", line))


def test_the_fingerprint_reads_as_many_pages_whatever_other_studies_hold(
    judged: tuple[Study, JudgeRun], cast: Cast
) -> None:
    """Issue 27: 1.8-2.4 s per analysis page in a database of several large studies, against
    ~0.1 s alone, nearly all of it the fingerprint reading other studies' rows. The measured
    study has 4 500 pairs; then another study's 18 000 pairs, 36 000 judgments and calls and
    4 000 answers and scores come after it: its fingerprint must touch about the pages it
    touched before (an index one level deeper may add one per lookup), filter no other study's
    rows, and keep its value."""
    study, _run = judged
    _study_filled(study, prompts=100)
    before_value = study_data_fingerprint(study=study)
    before = _buffers(_fingerprint_plan(study, analyze=True))
    _study_filled(cast.other_study, prompts=400)
    assert Pair.objects.filter(study=cast.other_study, source="all_pairs").count() == 400 * 45
    plan = _fingerprint_plan(study, analyze=True)
    assert _buffers(plan) <= before + 12, plan
    assert "Rows Removed by Filter" not in plan, plan
    assert study_data_fingerprint(study=study) == before_value


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
