"""The label budget planner as a researcher uses it: the page and `plan_labels` answer "N more
judgments, about $X at the study's pay, to reach ± Y points" from the stored report, checked
against the projection formula worked by hand from the report's variance components."""

from __future__ import annotations

import io
import json
import math

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from scipy import stats

from annotation.models import HumanJudgment, Study
from judges.models import Judge, JudgeCall, JudgeRun
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair
from tests.leaderboard.conftest import get_computed

JUDGE = "planned judge"
# Per prompt: the two workers' preferences; the judge always says A. Agreement varies by prompt
# (both, one, none), so both variance components are positive.
VOTES = [("A", "A"), ("A", "B"), ("B", "B"), ("A", "A"), ("A", "tie"), ("A", "A"),
         ("B", "A"), ("A", "A"), ("tie", "B"), ("A", "A"), ("A", "B"), ("A", "A")]  # fmt: skip
LIKERT = {"A": 2, "B": 7, "tie": 4}


@pytest.fixture
def planned_study(cast: Cast) -> Study:
    cast.study.pay_per_judgment_cents = 25
    cast.study.save(update_fields=["pay_per_judgment_cents"])
    judge = Judge.objects.create(name=JUDGE, kind=Judge.Kind.LLM)
    run = JudgeRun.objects.create(judge=judge, study=cast.study, status=JudgeRun.Status.DONE)
    for i, votes in enumerate(VOTES):
        pair = make_pair(cast.study, f"q{i}")
        for worker, preference in zip((cast.worker_one, cast.worker_two), votes, strict=True):
            HumanJudgment.objects.create(
                study=cast.study,
                pair=pair,
                worker=worker,
                assignment=make_assignment(pair, worker, a_left=True),
                a_left=True,
                likert_shown=LIKERT[preference],
                likert=LIKERT[preference],
                preference=preference,
            )
        JudgeCall.objects.create(
            run=run, pair=pair, order="ab", status="done", preference="A", likert=2
        )
    return cast.study


def _budget(study: Study) -> tuple[dict, int]:
    out = io.StringIO()
    call_command("agreement_report", f"--study={study.slug}", stdout=out)
    report = json.loads(out.getvalue())
    return report["label_budget"]["judges"][JUDGE], report["label_budget"]["human_votes"]


def _by_hand(budget: dict, human_votes: int, *, target: float, prompts: int) -> int:
    """Additional votes for ± target: n = s_w^2 / ((h / z)^2 - s_b^2 / C) comparisons, turned into
    votes at the judge's comparisons per vote."""
    z = stats.norm.ppf(0.975)
    comp = budget["components"]
    room = (target / z) ** 2 - comp["between"] / prompts
    assert room > 0
    comparisons = max(1, math.ceil(comp["within"] / room - 1e-9))
    votes = math.ceil(comparisons / (comp["labels"] / human_votes) - 1e-9)
    return max(0, votes - human_votes)


def test_plan_labels_prices_a_target_as_the_projection_formula_does_by_hand(
    planned_study: Study,
) -> None:
    budget, human_votes = _budget(planned_study)
    assert human_votes == 24
    assert budget["components"]["between"] > 0 and budget["components"]["within"] > 0
    more = _by_hand(budget, human_votes, target=0.18, prompts=12)
    assert more > 0
    out = io.StringIO()
    call_command("plan_labels", "--study=main-study", f"--judge={JUDGE}", "--target=18", stdout=out)
    text = out.getvalue()
    assert f"{JUDGE}: {more} more judgments, about ${more * 25 / 100:,.2f} at 25¢" in text
    assert "to reach ± 18.0 points" in text
    # More prompts lower the floor, so the same target needs fewer votes per prompt.
    wider = _by_hand(budget, human_votes, target=0.18, prompts=40)
    out = io.StringIO()
    call_command("plan_labels", "--study=main-study", "--target=18", "--prompts=40", stdout=out)
    assert f"{wider} more judgments" in out.getvalue()


def test_plan_labels_says_when_a_target_is_under_the_floor_and_names_bad_arguments(
    planned_study: Study,
) -> None:
    out = io.StringIO()
    call_command("plan_labels", "--study=main-study", "--target=0.5", stdout=out)
    assert "is out of reach on 12 prompts" in out.getvalue()
    out = io.StringIO()
    call_command("plan_labels", "--study=main-study", "--target=30", stdout=out)
    assert "± 30.0 points is reached already" in out.getvalue()
    with pytest.raises(CommandError, match="'nobody'.*planned judge"):
        call_command("plan_labels", "--study=main-study", "--judge=nobody", "--target=3")
    with pytest.raises(CommandError, match="at least that many"):
        call_command("plan_labels", "--study=main-study", "--target=3", "--prompts=2")
    with pytest.raises(CommandError, match="--target must be between"):
        call_command("plan_labels", "--study=main-study", "--target=0")
    with pytest.raises(CommandError, match="no such study"):
        call_command("plan_labels", "--study=nowhere")


def test_the_planner_page_answers_the_target_with_the_projection_plot(
    client: Client, cast: Cast, planned_study: Study
) -> None:
    budget, human_votes = _budget(planned_study)
    more = _by_hand(budget, human_votes, target=0.18, prompts=12)
    page = reverse("leaderboard:study_label_plan", kwargs={"slug": planned_study.slug})
    client.force_login(cast.researcher)
    analysis = get_computed(
        client, reverse("leaderboard:study_analysis", kwargs={"slug": planned_study.slug})
    )
    assert f'href="{page}"' in analysis.content.decode()
    blank = get_computed(client, page)
    assert blank.status_code == 200
    assert b'id="plan-form"' in blank.content and b'id="plan-answer"' not in blank.content
    assert b"<svg" in blank.content  # the projection plot
    answered = client.get(page, {"judge": JUDGE, "target_points": "18"})
    body = answered.content.decode()
    assert f"{more} more judgments, about ${more * 25 / 100:,.2f} at 25¢ per judgment" in body
    bad = client.get(page, {"judge": JUDGE, "target_points": "-1"})
    assert bad.status_code == 200 and b'id="plan-answer"' not in bad.content
    assert b"greater than or equal to 0.1" in bad.content
    few = client.get(page, {"judge": JUDGE, "target_points": "18", "prompts": "3"})
    assert b"give at least that many" in few.content


@pytest.mark.parametrize("who", ["outsider", "worker", "other_researcher"])
def test_the_planner_page_is_a_404_for_everyone_but_the_studys_researchers(
    client: Client, cast: Cast, planned_study: Study, who: str
) -> None:
    study = planned_study
    if who == "outsider":
        client.force_login(cast.outsider)
    elif who == "worker":
        assert cast.worker_one.user is not None
        client.force_login(cast.worker_one.user)
    else:
        client.force_login(cast.researcher)
        study = cast.other_study
    page = reverse("leaderboard:study_label_plan", kwargs={"slug": study.slug})
    assert client.get(page, {"judge": JUDGE, "target_points": "3"}).status_code == 404
