"""The single-answer grades section (MT-Bench's table) on a hand-made study: a grading judge's
recorded grades, each system's mean per category against a plain Python mean, and the judge's
derived pair verdicts read by the other sections like any judge's."""

from __future__ import annotations

import pytest

from annotation.models import Answer, Pair, Prompt, System
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.grading import grade_pairs_derive
from leaderboard.report.registry import section_get
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.conftest import Cast

pytestmark = pytest.mark.django_db
FAST = ReportParams(ci_rounds=200, elo_rounds=3, bt_rounds=3)
# prompt -> (category, {system: grade})
GRADES = {
    "m1": ("math", {"s1": 9, "s2": 3}),
    "m2": ("math", {"s1": 7, "s2": 5}),
    "w1": ("writing", {"s1": 6, "s2": 6}),
    "w2": ("writing", {"s1": 8, "s2": 4}),
    "w3": ("writing", {"s1": 5, "s2": 8}),
}


@pytest.fixture
def graded(cast: Cast) -> JudgeRun:
    study = cast.study
    systems = {name: System.objects.create(study=study, name=name) for name in ("s1", "s2")}
    judge = Judge.objects.create(
        name="grader", kind="llm", output_format="grade", order_invariant=True
    )
    run = JudgeRun.objects.create(judge=judge, study=study, status="running")
    for external_id, (category, grades) in GRADES.items():
        prompt = Prompt.objects.create(
            study=study, external_id=external_id, category=category, turns=["?"]
        )
        answers = {
            name: Answer.objects.create(prompt=prompt, system=system, turns=[f"{name} says"])
            for name, system in systems.items()
        }
        pair = Pair.objects.create(
            study=study, prompt=prompt, answer_a=answers["s1"], answer_b=answers["s2"]
        )
        run.pairs.add(pair)
        for name, grade in grades.items():
            JudgeCall.objects.create(
                run=run, answer=answers[name], turn=1, order="one", status="done", grade=grade
            )
    grade_pairs_derive(run_id=run.pk)
    JudgeRun.objects.filter(pk=run.pk).update(status="done")
    return run


def test_each_systems_mean_grade_per_category_equals_the_plain_mean(graded: JudgeRun) -> None:
    payload = agreement_report_build(study=graded.study, params=FAST)
    section = payload["single_grades"]
    assert "equal grades are a tie" in section["tie_rule"]
    rows = {(r["system"], r["category"]): r["grade"] for r in section["sources"]["grader"]}
    for system in ("s1", "s2"):
        for category in ("math", "writing", "all"):
            values = [grades[system] for cat, grades in GRADES.values() if category in ("all", cat)]
            cell = rows[(system, category)]
            assert cell["mean"] == pytest.approx(sum(values) / len(values))
            assert (cell["grades"], cell["prompts"]) == (len(values), len(values))
            assert cell["resampled"] == "prompt"
            assert cell["lower"] <= cell["mean"] <= cell["upper"]
    # s1's math grades 9 and 7 on two prompts: a round's mean is 9, 8 or 7.
    assert (rows[("s1", "math")]["lower"], rows[("s1", "math")]["upper"]) == (7.0, 9.0)
    assert list(rows)[-1] == ("s2", "all")


def test_the_derived_verdicts_are_the_judges_votes_in_every_other_section(
    graded: JudgeRun,
) -> None:
    payload = agreement_report_build(study=graded.study, params=FAST)
    rates = payload["win_rates"]["sources"]["grader"]
    # s1 wins m1, m2, w2, loses w3, ties w1: (3 + 0.5) / 5.
    i, j = rates["models"].index("s1"), rates["models"].index("s2")
    assert rates["battles"] == 5
    assert rates["rates"][i][j] == pytest.approx(3.5 / 5)


def test_the_table_has_a_row_per_system_and_category(graded: JudgeRun) -> None:
    from leaderboard.report.base import RenderContext

    section = section_get("single_grades")
    payload = agreement_report_build(study=graded.study, params=FAST)
    result = section.load(payload)
    (table,) = section.tables(result, RenderContext(("human", "grader"), ""))
    assert table.name == "single-grades"
    assert [row[:3] for row in table.rows] == [
        ("grader", s, c) for s in ("s1", "s2") for c in ("math", "writing", "all")
    ]


def test_a_study_without_a_grading_judge_has_no_table(cast: Cast) -> None:
    section = section_get("single_grades")
    payload = agreement_report_build(study=cast.study, params=FAST)
    assert payload["single_grades"]["sources"] == {}
    from leaderboard.report.base import RenderContext

    assert section.tables(section.load(payload), RenderContext(("human",), "")) == []
