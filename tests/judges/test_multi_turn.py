"""Multi-turn judging against the fake OpenAI server: a call per turn, the whole conversation in a
later turn's prompt as sent, the turn on every call, and the report's rule for comparing people.

The hand-made study: one prompt of two user turns, answered by systems x and y. Every answer
turn carries a marker for the fake server, "(ref t1-A)" in x's first turn, "(ref t2-B)" in y's
second, and so on; the server names a request by the markers of its judged turn alone (the text
after the last "User, turn" heading of a multi-turn prompt), so a turn-2 call's key is t2:ab or
t2:ba though its prompt shows the turn-1 answers too.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, Pair, Prompt, Study, System
from judges.llm.prompts import (
    GRADE,
    LIKERT,
    conversation_render,
    question_render,
    template_render,
)
from judges.models import Judge, JudgeCall, JudgeRun, Turns, template_hash
from judges.services.calls import judge_call_execute
from judges.services.panels import panel_create
from judges.services.runs import judge_run_start
from leaderboard.selectors.frames import VoteFilters, study_votes_get
from leaderboard.selectors.section_reads import report_grades_get
from leaderboard.services.exports import study_export
from tests.conftest import Cast
from tests.judges.conftest import make_llm_judge, panel_run
from tests.judges.fake_openai import FakeOpenAI, call_key

pytestmark = pytest.mark.django_db

Q1, Q2 = "Plan a three-day trip to Lisbon.", "Now cut it to one day, keeping the museum."
X = ["X plans three days (ref t1-A).", "X keeps the museum in one day (ref t2-A)."]
Y = ["Y plans three days (ref t1-B).", "Y drops the museum (ref t2-B)."]


def judged_turn_key(text: str) -> str:
    """The fake server's key from the markers of the judged turn: after the last turn heading."""
    at = text.rfind("User, turn ")
    return call_key(text[at:] if at >= 0 else text)


@pytest.fixture
def turn_fake(fake: FakeOpenAI) -> FakeOpenAI:
    fake.key_from = judged_turn_key
    return fake


def two_turn_study(study: Study, *, turns: tuple[int, ...] = (1,)) -> tuple[Answer, Answer, list]:
    """The two-turn prompt, x's and y's answers (x is A), and its pair at each of `turns`."""
    prompt = Prompt.objects.create(
        study=study, external_id="mt-1", category="writing", turns=[Q1, Q2]
    )
    x_system = System.objects.create(study=study, name="sys-x", version="1")
    y_system = System.objects.create(study=study, name="sys-y", version="1")
    x = Answer.objects.create(prompt=prompt, system=x_system, turns=X)
    y = Answer.objects.create(prompt=prompt, system=y_system, turns=Y)
    assert x.pk < y.pk  # canonical order: x is A
    pairs = [
        Pair.objects.create(study=study, prompt=prompt, answer_a=x, answer_b=y, turn=turn)
        for turn in turns
    ]
    return x, y, pairs


def llm_judge(fake: FakeOpenAI, *, name: str, template: str = "likert", **options) -> Judge:
    return make_llm_judge(fake, name=name, template=template, **options)


def run_all(run: JudgeRun) -> None:
    for call in JudgeCall.objects.filter(run=run, status=JudgeCall.Status.PENDING).order_by("pk"):
        assert judge_call_execute(call_id=call.pk).status == "done"
    run.refresh_from_db()


def sent(call: JudgeCall) -> str:
    return call.request["messages"][0]["content"]


def assert_in_order(text: str, parts: list[str]) -> None:
    positions = [text.index(part) for part in parts]
    assert positions == sorted(positions), list(zip(parts, positions, strict=True))


def test_a_judge_of_every_turn_sends_the_whole_conversation_at_turn_two(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str
) -> None:
    _, _, (pair,) = two_turn_study(cast.study)
    turn_fake.replies = {
        "t1:ab": "likert_first_better",  # turn 1: the first shown (x) better: A
        "t1:ba": "likert_second_better",  # y shown first, x second better: A
        "t2:ab": "likert_second_better",  # turn 2: y better: B
        "t2:ba": "likert_first_better",  # y shown first and better: B
    }
    judge = llm_judge(turn_fake, name="multi", multi_turn=True, turns=Turns.EACH)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert run.turns == Turns.EACH
    # One pair at turn 1, judged at both turns of its prompt, in both orders: four calls.
    assert sorted(run.calls.values_list("turn", "order")) == [
        (1, "ab"),
        (1, "ba"),
        (2, "ab"),
        (2, "ba"),
    ]
    run_all(run)
    assert run.status == JudgeRun.Status.DONE
    assert turn_fake.requests() == {"t1:ab": 1, "t1:ba": 1, "t2:ab": 1, "t2:ba": 1}
    calls = {(c.turn, c.order): c for c in run.calls.all()}

    # Turn 2 shows the whole conversation in order: each user turn, then both replies to it.
    second_ab = sent(calls[(2, "ab")])
    assert_in_order(second_ab, [Q1, X[0], Y[0], Q2, X[1], Y[1]])
    assert "Rate only the two replies to the person's message in turn 2" in second_ab
    assert "{conversation}" not in second_ab and "{turn}" not in second_ab
    # Shown the other way round, y's replies come first at both turns.
    assert_in_order(sent(calls[(2, "ba")]), [Q1, Y[0], X[0], Q2, Y[1], X[1]])
    # Turn 1 shows the first turn alone, with the plain template.
    first_ab = sent(calls[(1, "ab")])
    assert_in_order(first_ab, [Q1, X[0], Y[0]])
    assert Q2 not in first_ab and X[1] not in first_ab and Y[1] not in first_ab
    assert first_ab.startswith("You are rating two replies")

    # Parsed, and a verdict per turn: x better at turn 1, y at turn 2.
    assert {key: (c.parse_error, c.preference) for key, c in calls.items()} == {
        (1, "ab"): ("", "A"),
        (1, "ba"): ("", "A"),
        (2, "ab"): ("", "B"),
        (2, "ba"): ("", "B"),
    }
    assert {c.request["turn"] for c in calls.values()} == {1, 2}
    assert all(c.request["turn"] == c.turn for c in calls.values())

    # People judged the pair at its turn (1): the report's votes are the turn-1 calls only.
    votes = study_votes_get(study=cast.study, filters=VoteFilters())
    assert votes.judges["label"].astype(str).tolist() == ["A"]
    assert votes.calls["order"].astype(str).tolist() == ["ab", "ba"]


def test_the_calls_export_and_api_carry_the_turn_of_every_call(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str, client: Client
) -> None:
    _, _, (pair,) = two_turn_study(cast.study)
    judge = llm_judge(turn_fake, name="multi", multi_turn=True, turns=Turns.EACH)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    run_all(run)
    rows = list(
        csv.DictReader(
            io.StringIO(study_export(study=cast.study, table="calls", fmt="csv").decode())
        )
    )
    assert sorted((row["pair_id"], row["turn"], row["order"]) for row in rows) == [
        (str(pair.pk), "1", "ab"),
        (str(pair.pk), "1", "ba"),
        (str(pair.pk), "2", "ab"),
        (str(pair.pk), "2", "ba"),
    ]
    lines = study_export(study=cast.study, table="calls", fmt="jsonl").decode().splitlines()
    assert sorted(json.loads(line)["turn"] for line in lines) == [1, 1, 2, 2]
    client.force_login(cast.researcher)
    body = client.get(f"/api/v1/studies/{cast.study.slug}/calls/").json()
    results = body["results"] if isinstance(body, dict) else body
    assert sorted(row["turn"] for row in results) == [1, 1, 2, 2]
    # The run page and a call page show the judged turn.
    page = client.get(reverse("judges:run_detail", args=[cast.study.slug, run.pk]))
    assert page.status_code == 200
    assert page.content.decode().count('class="num call-turn">2<') == 2
    later = run.calls.filter(turn=2).order_by("pk")[0]
    call_page = client.get(reverse("judges:call_detail", args=[cast.study.slug, run.pk, later.pk]))
    assert "not the pair's turn" in call_page.content.decode()


def test_a_run_with_the_pair_at_each_turn_judges_each_turn_once(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str
) -> None:
    _, _, (first, second) = two_turn_study(cast.study, turns=(1, 2))
    turn_fake.replies = {
        "t1:ab": "likert_first_better",
        "t1:ba": "likert_second_better",
        "t2:ab": "likert_second_better",
        "t2:ba": "likert_first_better",
    }
    judge = llm_judge(turn_fake, name="multi", multi_turn=True, turns=Turns.EACH)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    # Each turn is judged on the pair at that turn, never twice.
    assert sorted(run.calls.values_list("pair_id", "turn", "order")) == [
        (first.pk, 1, "ab"),
        (first.pk, 1, "ba"),
        (second.pk, 2, "ab"),
        (second.pk, 2, "ba"),
    ]
    run_all(run)
    assert sum(turn_fake.requests().values()) == 4
    # Each pair's people are compared with the calls at its turn: A at turn 1, B at turn 2.
    votes = study_votes_get(study=cast.study, filters=VoteFilters())
    by_pair = dict(zip(votes.judges["pair_id"], votes.judges["label"].astype(str), strict=True))
    assert by_pair == {first.pk: "A", second.pk: "B"}
    assert study_votes_get(study=cast.study, filters=VoteFilters(turn=2)).judges["label"].astype(
        str
    ).tolist() == ["B"]


def test_a_grading_judge_of_every_turn_grades_each_answer_at_each_turn(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str
) -> None:
    x, y, (pair,) = two_turn_study(cast.study)
    turn_fake.replies = {
        "t1:ab": "grade_eight",  # x at turn 1 (its marker is an A marker)
        "t1:ba": "grade_five",  # y at turn 1
        "t2:ab": "grade_five",  # x at turn 2
        "t2:ba": "grade_ten_of_ten",  # y at turn 2
    }
    judge = llm_judge(turn_fake, name="grader", template="grade", multi_turn=True, turns="each")
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    grades = JudgeCall.objects.filter(run=run, answer__isnull=False)
    assert sorted(grades.values_list("answer_id", "turn")) == [
        (x.pk, 1),
        (x.pk, 2),
        (y.pk, 1),
        (y.pk, 2),
    ]
    run_all(run)
    assert turn_fake.requests() == {"t1:ab": 1, "t1:ba": 1, "t2:ab": 1, "t2:ba": 1}
    x_second = sent(grades.get(answer=x, turn=2))
    assert_in_order(x_second, [Q1, X[0], Q2, X[1]])
    assert Y[0] not in x_second and Y[1] not in x_second
    assert "Grade only the assistant's reply in turn 2" in x_second
    x_first = sent(grades.get(answer=x, turn=1))
    assert Q1 in x_first and X[0] in x_first and Q2 not in x_first and X[1] not in x_first
    # A derived pair verdict per turn, each from the two grades at that turn.
    derived = {
        c.turn: (c.preference, c.score_a, c.score_b)
        for c in JudgeCall.objects.filter(run=run, pair=pair)
    }
    assert derived == {1: ("A", 8.0, 5.0), 2: ("B", 5.0, 10.0)}
    votes = study_votes_get(study=cast.study, filters=VoteFilters())
    assert votes.judges["label"].astype(str).tolist() == ["A"]
    # The single-grade table's grades: both turns, or one turn's alone under the turn filter,
    # though the study has its pair at turn 1 only.
    graded = report_grades_get(study=cast.study, filters=VoteFilters(), run_ids=[run.pk])
    assert sorted(zip(graded["turn"], graded["grade"], strict=True)) == [
        (1, 5.0),
        (1, 8.0),
        (2, 5.0),
        (2, 10.0),
    ]
    second = report_grades_get(study=cast.study, filters=VoteFilters(turn=2), run_ids=[run.pk])
    assert dict(zip(second["system"], second["grade"], strict=True)) == {
        "sys-x": 5.0,
        "sys-y": 10.0,
    }


def test_a_judge_of_the_pairs_turn_behaves_as_before(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str
) -> None:
    _, _, (first, second) = two_turn_study(cast.study, turns=(1, 2))
    judge = llm_judge(turn_fake, name="plain")
    assert judge.turns == Turns.PAIR and judge.multi_turn_template == ""
    # Its template's hash is the template's alone, as before multi-turn templates.
    assert judge.template_hash == template_hash(LIKERT.text)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert sorted(run.calls.values_list("pair_id", "turn", "order")) == [
        (first.pk, 1, "ab"),
        (first.pk, 1, "ba"),
        (second.pk, 2, "ab"),
        (second.pk, 2, "ba"),
    ]
    run_all(run)
    later = sent(run.calls.get(pair=second, order="ab"))
    # The plain template at turn 2: every turn up to it, each reply's side labelled as before.
    assert later.startswith("You are rating two replies")
    assert "(Turn 1) " + Q1 in later and "(Reply, turn 2) " + X[1] in later
    assert later == template_render(
        LIKERT.text,
        question=question_render([Q1, Q2], 2),
        answer_first=conversation_render([Q1, Q2], X, 2),
        answer_second=conversation_render([Q1, Q2], Y, 2),
        turn=2,
    )
    assert "First assistant, turn" not in later


def test_a_pair_call_made_without_its_turn_gets_the_pairs_turn(cast: Cast) -> None:
    _, _, (pair,) = two_turn_study(cast.study, turns=(2,))
    judge = Judge.objects.create(name="imported", kind=Judge.Kind.IMPORTED)
    run = JudgeRun.objects.create(judge=judge, study=cast.study, status=JudgeRun.Status.IMPORTED)
    call = JudgeCall.objects.create(run=run, pair=pair, order="ab", preference="A")
    call.refresh_from_db()
    assert call.turn == 2


def test_a_multi_turn_template_must_show_the_conversation(fake: FakeOpenAI) -> None:
    with pytest.raises(ValidationError, match="conversation"):
        llm_judge(fake, name="broken", multi_turn_template="Rate turn {turn}.")
    with pytest.raises(ValidationError, match="multi-turn variant"):
        llm_judge(fake, name="none", template="likert_no_position", multi_turn=True)
    with pytest.raises(ValidationError, match="turns"):
        llm_judge(fake, name="odd", turns="some")
    assert "{conversation}" in GRADE.multi_turn_text and "{conversation}" in LIKERT.multi_turn_text


def test_a_researcher_makes_a_judge_of_every_turn_from_the_judge_page(
    cast: Cast, fake: FakeOpenAI, client: Client
) -> None:
    from tests.judges.test_judge_pages import create_form

    client.force_login(cast.researcher)
    url = reverse("judges:judge_create", args=[cast.study.slug])
    response = client.post(url, create_form(fake, turns="each", multi_turn="on"))
    judge = Judge.objects.get(name="gpt-fake-pasted")
    assert judge.turns == Turns.EACH and judge.multi_turn_template == LIKERT.multi_turn_text
    assert judge.template_hash == template_hash(LIKERT.text, "", LIKERT.multi_turn_text)
    page = client.get(response["Location"]).content.decode()
    assert "Every turn of the prompt; later turns show the whole conversation" in page
    # A template without a multi-turn variant keeps its plain template at every turn.
    client.post(
        url, create_form(fake, name="plain-judge", template="likert_no_position", multi_turn="on")
    )
    assert Judge.objects.get(name="plain-judge").multi_turn_template == ""


def test_a_panel_member_of_every_turn_votes_with_its_calls_at_the_pairs_turn(cast: Cast) -> None:
    _, _, (pair,) = two_turn_study(cast.study)
    members = []
    # Each member's run judged the turn-1 pair at turn 2 (B) and at turn 1 (A), in both orders.
    for name in ("m1", "m2"):
        judge = Judge.objects.create(name=name, kind=Judge.Kind.LLM, study=cast.study)
        run = JudgeRun.objects.create(
            judge=judge, study=cast.study, status="done", turns=Turns.EACH
        )
        run.pairs.set([pair])
        # The turn-2 calls first, so that a panel reading calls by id alone would meet them first.
        for turn, likert, preference in ((2, 7, "B"), (1, 2, "A")):
            for order in ("ab", "ba"):
                JudgeCall.objects.create(
                    run=run,
                    pair=pair,
                    order=order,
                    turn=turn,
                    status="done",
                    likert=likert,
                    preference=preference,
                )
        members.append(judge)
    panel = panel_create(name="jury", study=cast.study, members=members, rule="majority")
    run = panel_run(judge=panel, study=cast.study, user=cast.researcher)
    calls = run.calls.order_by("order")
    assert [(c.order, c.turn, c.preference) for c in calls] == [("ab", 1, "A"), ("ba", 1, "A")]


def test_a_verdict_judge_at_turn_two_names_its_assistants_in_the_order_shown(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str
) -> None:
    _, _, (pair,) = two_turn_study(cast.study, turns=(2,))
    # [[A]] names the assistant shown first: x when A is first, y when B is.
    turn_fake.replies = {"t2:ab": "verdict_first", "t2:ba": "verdict_first"}
    judge = llm_judge(turn_fake, name="referee", template="verdict", multi_turn=True)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    run_all(run)
    calls = {c.order: c for c in run.calls.all()}
    assert {order: (c.turn, c.preference) for order, c in calls.items()} == {
        "ab": (2, "A"),
        "ba": (2, "B"),
    }
    shown = sent(calls["ab"])
    assert_in_order(shown, [Q1, X[0], Y[0], Q2, X[1], Y[1]])
    assert "Compare only the two replies to the user's message in turn 2" in shown


@pytest.mark.parametrize(
    ("template", "reply", "heading"),
    [
        ("two_scores", "two_scores", "Grade only each assistant's reply in turn 2"),
        ("values", "values_second", "Compare only the two replies in turn 2"),
    ],
)
def test_the_two_scores_and_values_judges_at_turn_two_see_the_conversation(
    cast: Cast, turn_fake: FakeOpenAI, api_key: str, template: str, reply: str, heading: str
) -> None:
    _, _, (pair,) = two_turn_study(cast.study, turns=(2,))
    turn_fake.replies = {"t2:ab": reply, "t2:ba": reply}
    judge = llm_judge(turn_fake, name=f"{template} judge", template=template, multi_turn=True)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    run_all(run)
    calls = {c.order: c for c in run.calls.all()}
    # The first-shown answer wins in two_scores' "8 5" and loses in values' "SECOND".
    first_wins = template == "two_scores"
    assert {order: (c.turn, c.preference) for order, c in calls.items()} == {
        "ab": (2, "A" if first_wins else "B"),
        "ba": (2, "B" if first_wins else "A"),
    }
    shown = sent(calls["ab"])
    assert_in_order(shown, [Q1, X[0], Y[0], Q2, X[1], Y[1]])
    assert heading in shown
