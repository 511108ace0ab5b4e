"""Single-answer grading and reference-guided judging, against the fake OpenAI server."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from annotation.models import Answer, Pair, Prompt, System
from judges.llm.parsing import grade_parse
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.calls import judge_call_execute
from judges.services.grading import TIE_RULE, grade_preference
from judges.services.judges import judge_create
from judges.services.runs import judge_run_start
from tests.judges.conftest import KEY_ENV, make_llm_judge

pytestmark = pytest.mark.django_db


def grading_judge(fake, *, name="grader", reference_guided=False, template="grade"):
    return make_llm_judge(fake, name=name, template=template, reference_guided=reference_guided)


def three_systems_on_one_prompt(study, *, category="advice", ref="g0", reference=None):
    """One prompt answered by three systems, and its three pairs: each answer is in two pairs.

    Each answer carries a marker "(ref <ref><x>-A)" so the fake server tells the grade calls
    apart: the key of answer x is "<ref><x>:ab".
    """
    prompt = Prompt.objects.create(
        study=study,
        external_id=ref,
        category=category,
        turns=[f"Question {ref}?"],
        reference_turns=reference,
        reference_source="imported" if reference else "",
    )
    answers = {}
    for letter in "xyz":
        system, _ = System.objects.get_or_create(study=study, name=f"sys-{letter}", version="1")
        answers[letter] = Answer.objects.create(
            prompt=prompt, system=system, turns=[f"Answer {letter} (ref {ref}{letter}-A)."]
        )
    pairs = [
        Pair.objects.create(study=study, prompt=prompt, answer_a=answers[a], answer_b=answers[b])
        for a, b in (("x", "y"), ("x", "z"), ("y", "z"))
    ]
    return prompt, answers, pairs


def run_all(run):
    for call in JudgeCall.objects.filter(run=run, status=JudgeCall.Status.PENDING):
        assert judge_call_execute(call_id=call.pk).status == "done"
    run.refresh_from_db()


@pytest.mark.parametrize(
    ("reply", "grade", "error"),
    [
        ("7\nGood.", 7.0, ""),
        ("**9**\nGood.", 9.0, ""),
        ("8/10\nGood.", 8.0, ""),
        ("7.5\nGood.", None, "not a whole number"),
        ("11\nGood.", None, "outside 1-10"),
        ("0", None, "outside 1-10"),
        ("7 8", None, "more than one number"),
        ("Grade: 7", None, "more than the grade"),
        ("The reply is fine.", None, "no grade"),
    ],
)
def test_a_grade_is_read_only_when_it_stands_alone_on_the_first_line(reply, grade, error):
    parsed = grade_parse(reply)
    assert parsed.grade == grade
    assert error in parsed.parse_error if error else parsed.ok


def test_the_tie_rule_is_the_higher_grade_wins_and_equal_grades_tie():
    assert [grade_preference(8, 5), grade_preference(5, 8), grade_preference(6, 6)] == [
        "A",
        "B",
        "tie",
    ]
    assert "equal grades are a tie" in TIE_RULE


def test_each_answer_is_graded_once_and_every_pair_verdict_derives_from_two_grades(
    cast, fake, api_key
):
    _, answers, pairs = three_systems_on_one_prompt(cast.study)
    fake.replies = {"g0x:ab": "grade_eight", "g0y:ab": "grade_five", "g0z:ab": "grade_five"}
    judge = grading_judge(fake)
    assert judge.order_invariant
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    grade_calls = JudgeCall.objects.filter(run=run, answer__isnull=False)
    # Three answers in three pairs: three calls, not six (nor twelve in both orders).
    assert grade_calls.count() == 3 and run.calls.count() == 3
    assert set(grade_calls.values_list("order", "turn")) == {("one", 1)}
    run_all(run)
    assert run.status == JudgeRun.Status.DONE
    assert fake.requests() == {"g0x:ab": 1, "g0y:ab": 1, "g0z:ab": 1}
    x = grade_calls.get(answer=answers["x"])
    assert x.grade == 8.0 and x.cost_usd > 0
    sent = x.request["messages"][0]["content"]
    # The prompt as sent shows the one answer and none of the others.
    assert "(ref g0x-A)" in sent and "g0y" not in sent and "g0z" not in sent
    assert "Question g0?" in sent and "{answer}" not in sent
    assert x.request["answer_id"] == answers["x"].pk and x.request["turn"] == 1
    verdicts = {
        call.pair_id: (call.preference, call.score_a, call.score_b, call.likert)
        for call in JudgeCall.objects.filter(run=run, pair__isnull=False)
    }
    assert verdicts == {
        pairs[0].pk: ("A", 8.0, 5.0, None),  # x 8 over y 5
        pairs[1].pk: ("A", 8.0, 5.0, None),  # x 8 over z 5
        pairs[2].pk: ("tie", 5.0, 5.0, None),  # y 5 = z 5: a tie
    }
    derived = JudgeCall.objects.get(run=run, pair=pairs[0])
    assert derived.order == "ab" and derived.cost_usd == 0
    assert derived.request["derived_from_grade_calls"]["A"] == x.pk
    assert derived.request["tie_rule"] == TIE_RULE


def test_a_second_run_reuses_the_grades_and_pays_nothing(cast, fake, api_key):
    _, answers, pairs = three_systems_on_one_prompt(cast.study)
    fake.replies = {"g0x:ab": "grade_eight", "g0y:ab": "grade_five", "g0z:ab": "grade_ten_of_ten"}
    judge = grading_judge(fake)
    first = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    run_all(first)
    second = judge_run_start(judge=judge, study=cast.study, user=cast.researcher, pairs=pairs[:2])
    # Every grade was made before: the run is done at once, with nothing sent or paid.
    assert second.status == JudgeRun.Status.DONE
    assert sum(fake.requests().values()) == 3
    copied = JudgeCall.objects.filter(run=second, answer__isnull=False)
    assert copied.count() == 3
    assert {c.cost_usd for c in copied} == {Decimal(0)}
    x = copied.get(answer=answers["x"])
    original = JudgeCall.objects.get(run=first, answer=answers["x"])
    assert x.request["reused_from_call"] == original.pk
    assert x.request["messages"] == original.request["messages"]
    assert dict(
        JudgeCall.objects.filter(run=second, pair__isnull=False).values_list(
            "pair_id", "preference"
        )
    ) == {pairs[0].pk: "A", pairs[1].pk: "B"}


def test_a_grade_that_did_not_parse_leaves_its_pairs_without_a_verdict(cast, fake, api_key):
    _, answers, pairs = three_systems_on_one_prompt(cast.study)
    fake.replies = {"g0x:ab": "likert_prose_only", "g0y:ab": "grade_five", "g0z:ab": "grade_eight"}
    run = judge_run_start(judge=grading_judge(fake), study=cast.study, user=cast.researcher)
    run_all(run)
    x = JudgeCall.objects.get(run=run, answer=answers["x"])
    assert x.grade is None and "no grade" in x.parse_error
    calls = {c.pair_id: c for c in JudgeCall.objects.filter(run=run, pair__isnull=False)}
    assert calls[pairs[0].pk].preference == "" and "no grade for answer A" in (
        calls[pairs[0].pk].parse_error
    )
    assert calls[pairs[2].pk].preference == "B"
    # An unparsed grade is not copied into a later run: it is asked again.
    again = judge_run_start(
        judge=grading_judge(fake, name="g2"), study=cast.study, user=cast.researcher
    )
    assert JudgeCall.objects.filter(run=again, status=JudgeCall.Status.PENDING).count() == 3


def test_an_edited_template_grades_again(cast, fake, api_key):
    three_systems_on_one_prompt(cast.study)
    fake.default_reply = "grade_five"
    judge = grading_judge(fake)
    run_all(judge_run_start(judge=judge, study=cast.study, user=cast.researcher))
    judge.prompt_template += "\nBe strict."
    judge.template_hash = "edited"
    judge.save()
    again = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert JudgeCall.objects.filter(run=again, status=JudgeCall.Status.PENDING).count() == 3


def test_a_grading_template_must_show_its_answer(fake):
    with pytest.raises(ValidationError, match="answer"):
        judge_create(
            name="bad",
            kind=Judge.Kind.LLM,
            model_name="m",
            base_url=fake.base_url,
            api_key_env=KEY_ENV,
            prompt_template="Grade {question} from 1 to 10.",
            output_format="grade",
        )


def test_reference_guided_grading_shows_the_reference_in_its_categories_only(cast, fake, api_key):
    cast.study.reference_categories = ["math"]
    cast.study.save()
    three_systems_on_one_prompt(
        cast.study, category="math", ref="m0", reference=["The answer is 42, since 6 x 7 = 42."]
    )
    three_systems_on_one_prompt(cast.study, category="advice", ref="a0")
    fake.default_reply = "grade_five"
    run = judge_run_start(
        judge=grading_judge(fake, reference_guided=True), study=cast.study, user=cast.researcher
    )
    run_all(run)
    for call in JudgeCall.objects.filter(run=run, answer__isnull=False).select_related(
        "answer__prompt"
    ):
        sent = call.request["messages"][0]["content"]
        assert call.answer is not None
        if call.answer.prompt.category == "math":
            assert "The answer is 42, since 6 x 7 = 42." in sent
            assert call.request["reference_source"] == "imported"
            assert call.request["reference_hash"]
        else:
            assert "Reference answer" not in sent and call.request["reference_hash"] is None


def test_reference_guided_pairwise_judging_shows_the_reference(cast, fake, api_key):
    cast.study.reference_categories = ["math"]
    cast.study.save()
    _, _, pairs = three_systems_on_one_prompt(
        cast.study, category="math", ref="m1", reference=["x = 3"]
    )
    judge = grading_judge(fake, name="pairwise-ref", template="likert", reference_guided=True)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher, pairs=pairs[:1])
    call = JudgeCall.objects.get(run=run, pair=pairs[0], order="ab")
    assert judge_call_execute(call_id=call.pk).status == "done"
    call.refresh_from_db()
    sent = call.request["messages"][0]["content"]
    assert "Reference answer:\n<<<\nx = 3\n>>>" in sent
    assert sent.index("(ref m1x-A)") < sent.index("(ref m1y-A)")
    assert call.preference == "A"


def test_a_run_that_needs_a_missing_reference_refuses_to_start(cast, fake, api_key):
    cast.study.reference_categories = ["math"]
    cast.study.save()
    three_systems_on_one_prompt(cast.study, category="math", ref="m2")
    with pytest.raises(ValidationError, match="m2"):
        judge_run_start(
            judge=grading_judge(fake, reference_guided=True),
            study=cast.study,
            user=cast.researcher,
        )
    # A judge without a reference template needs none.
    run = judge_run_start(
        judge=grading_judge(fake, name="plain"), study=cast.study, user=cast.researcher
    )
    assert run.calls.count() == 3


def test_a_grading_judges_cost_in_the_report_is_its_grade_calls_on_the_pairs_answers(
    cast, fake, api_key
):
    from annotation.models import HumanJudgment
    from leaderboard.selectors.frames import VoteFilters
    from leaderboard.selectors.section_reads import report_costs_get

    _, _, pairs = three_systems_on_one_prompt(cast.study)
    fake.default_reply = "grade_five"
    run = judge_run_start(judge=grading_judge(fake), study=cast.study, user=cast.researcher)
    run_all(run)
    paid = {c.answer_id: c.cost_usd for c in run.calls.filter(answer__isnull=False)}
    costs, _ = report_costs_get(
        study=cast.study,
        filters=VoteFilters(),
        judgments=HumanJudgment.objects.none(),
        run_ids=[run.pk],
    )
    (row,) = costs.to_dict("records")
    # Three pairs judged, three answers graded once each: the cost is the three grades'.
    assert row["pairs"] == 3
    assert row["cost_usd"] == pytest.approx(float(sum(paid.values())))
    assert float(run.spent_usd) == pytest.approx(row["cost_usd"])
