"""The follow-up rationale-only study: sampled from the pairs where two judges disagree, in one
action from the dashboard, opened by a worker with the better answer shown."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, Assignment, HumanJudgment, Pair, Study
from annotation.selectors.work import pair_rationale_winner
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.services.followup import followup_study_create
from tests.annotation.work_helpers import enter_and_consent, make_pairs
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.leaderboard.conftest import get_computed


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@dataclass
class Setup:
    study: Study
    run_x: JudgeRun
    run_y: JudgeRun
    expected: dict[str, str]  # prompt external id -> the side shown as better


def _call(run: JudgeRun, pair: Pair, preference: str, order: str = "ab") -> None:
    JudgeCall.objects.create(run=run, pair=pair, order=order, status="done", preference=preference)


@pytest.fixture
def setup(cast: Cast) -> Setup:
    """16 one-pair prompts. X votes A everywhere; Y votes A on p10-p11 and B elsewhere. p0-p11
    are ranked (the better is A); p12-p13 have no ranks but both people chose B; p14-p15 have
    neither (no known better answer). On p10 X asked in both orders changes its mind, so it
    votes tie and still differs from Y; on p11 both vote A. So 13 pairs are available."""
    study = cast.study
    pairs = make_pairs(study, 16)
    run_x = JudgeRun.objects.create(
        judge=Judge.objects.create(name="judge x", kind="llm"), study=study, status="done"
    )
    run_y = JudgeRun.objects.create(
        judge=Judge.objects.create(name="judge y", kind="llm"), study=study, status="done"
    )
    expected = {}
    for i, pair in enumerate(pairs):
        _call(run_x, pair, "A")
        _call(run_y, pair, "A" if i in (10, 11) else "B")
        if i >= 12:
            Answer.objects.filter(pk__in=[pair.answer_a_id, pair.answer_b_id]).update(rank=None)
        if i in (12, 13):
            for worker in (cast.worker_one, cast.worker_two):
                HumanJudgment.objects.create(
                    study=study,
                    pair=pair,
                    worker=worker,
                    assignment=make_assignment(pair, worker),
                    a_left=True,
                    likert_shown=7,
                    likert=7,
                    preference="B",
                )
            expected[f"p{i}"] = "B"
        elif i < 10:
            expected[f"p{i}"] = "A" if pair.answer_a.rank == 1 else "B"
    # A judge that changes its mind when the order is swapped votes tie: still a disagreement.
    _call(run_x, pairs[10], "B", order="ba")
    expected["p10"] = "A" if pairs[10].answer_a.rank == 1 else "B"
    return Setup(study, run_x, run_y, expected)


def followup_pairs(study: Study) -> dict[str, str]:
    """The follow-up's pairs as prompt external id -> the side its form shows as better."""
    pairs = Pair.objects.filter(study=study).select_related("prompt", "answer_a", "answer_b")
    out = {}
    for pair in pairs:
        assert pair.answer_a.prompt_id == pair.prompt_id and pair.answer_a.prompt.study == study
        out[pair.prompt.external_id] = pair.rationale_winner
    return out


def test_a_follow_up_holds_the_sampled_disagreements_and_the_same_seed_gives_the_same_sample(
    cast: Cast, setup: Setup
) -> None:
    first = followup_study_create(
        study=setup.study,
        judge_a_run=setup.run_x,
        judge_b_run=setup.run_y,
        sample_size=5,
        seed=3,
        user=cast.researcher,
    )
    again = followup_study_create(
        study=setup.study,
        judge_a_run=setup.run_x,
        judge_b_run=setup.run_y,
        sample_size=5,
        seed=3,
        user=cast.researcher,
    )
    assert (first.slug, again.slug) == ("main-study-followup-1", "main-study-followup-2")
    sample = followup_pairs(first)
    assert len(sample) == 5
    assert sample == followup_pairs(again)
    assert set(sample) <= set(setup.expected)
    assert sample == {key: setup.expected[key] for key in sample}
    assert first.form_rationale_only and not first.form_likert
    assert first.status == Study.Status.DRAFT
    assert first.members.filter(pk=cast.researcher.pk).exists()
    assert not Pair.objects.filter(study=first, is_gold=True).exists()


def test_a_sample_larger_than_the_disagreements_takes_them_all(cast: Cast, setup: Setup) -> None:
    followup = followup_study_create(
        study=setup.study, judge_a_run=setup.run_x, judge_b_run=setup.run_y, user=cast.researcher
    )
    assert followup_pairs(followup) == setup.expected
    assert len(setup.expected) == 13 == min(300, 13)
    # The form shows that side, also where the copied answers carry no ranks (p12, p13).
    for pair in Pair.objects.filter(study=followup).select_related("answer_a", "answer_b"):
        assert pair_rationale_winner(pair=pair) == setup.expected[pair.prompt.external_id]


def test_runs_of_another_study_or_the_same_run_twice_are_refused(cast: Cast, setup: Setup) -> None:
    foreign = JudgeRun.objects.create(judge=setup.run_y.judge, study=cast.other_study)
    with pytest.raises(ValidationError, match="belong to the study"):
        followup_study_create(
            study=setup.study, judge_a_run=setup.run_x, judge_b_run=foreign, user=cast.researcher
        )
    with pytest.raises(ValidationError, match="two different"):
        followup_study_create(
            study=setup.study,
            judge_a_run=setup.run_x,
            judge_b_run=setup.run_x,
            user=cast.researcher,
        )
    assert not Study.objects.filter(slug__contains="followup").exists()


def test_a_worker_opens_a_follow_up_item_and_sees_the_better_answer_and_is_asked_why(
    client: Client, cast: Cast, setup: Setup
) -> None:
    followup = followup_study_create(
        study=setup.study,
        judge_a_run=setup.run_x,
        judge_b_run=setup.run_y,
        sample_size=3,
        user=cast.researcher,
    )
    Study.objects.filter(pk=followup.pk).update(status=Study.Status.LIVE)
    followup.refresh_from_db()
    enter_and_consent(client, followup, "PID-follow")
    response = client.get(f"/work/{followup.slug}/")
    public_id = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    assignment = Assignment.objects.select_related("pair").get(public_id=public_id)
    winner = assignment.pair.rationale_winner
    side = "left" if (winner == "A") == assignment.a_left else "right"
    page = client.get(f"/work/{followup.slug}/item/{public_id}/").content.decode()
    assert f"The <strong>{side}</strong> answer was rated better" in page
    assert 'name="likert"' not in page and 'name="values"' in page
    client.post(
        f"/work/{followup.slug}/item/{public_id}/",
        {"submission_id": str(uuid.uuid4()), "values": ["clarity"]},
    )
    judgment = HumanJudgment.objects.get(assignment=assignment)
    assert judgment.preference == winner and judgment.values == ["clarity"]


def post_url(study: Study) -> str:
    return reverse("leaderboard:study_followup_create", kwargs={"slug": study.slug})


def test_a_member_creates_the_follow_up_with_the_dashboard_button(
    client: Client, cast: Cast, setup: Setup
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(
        client, reverse("leaderboard:study_analysis", kwargs={"slug": "main-study"})
    )
    assert b"Create follow-up study" in page.content
    response = client.post(
        post_url(setup.study),
        {
            "judge_a_run": setup.run_x.pk,
            "judge_b_run": setup.run_y.pk,
            "sample_size": 4,
            "seed": 1,
        },
    )
    assert response.status_code == 302
    assert response["Location"] == "/studies/main-study-followup-1/"
    assert Pair.objects.filter(study__slug="main-study-followup-1").count() == 4
    detail = client.get(response["Location"])
    assert detail.status_code == 200 and b"main-study-followup-1 with 4 pairs" in detail.content


def test_the_same_run_twice_from_the_page_creates_nothing_and_says_why(
    client: Client, cast: Cast, setup: Setup
) -> None:
    client.force_login(cast.admin)
    response = client.post(
        post_url(setup.study),
        {"judge_a_run": setup.run_x.pk, "judge_b_run": setup.run_x.pk, "sample_size": 4, "seed": 1},
        follow=True,
    )
    assert b"two different judge runs" in response.content
    assert not Study.objects.filter(slug__contains="followup").exists()


@pytest.mark.parametrize("who", ["outsider", "worker", "non_member_researcher"])
def test_everyone_else_gets_a_404_from_the_follow_up_action(
    client: Client, cast: Cast, setup: Setup, who: str
) -> None:
    study = setup.study
    if who == "outsider":
        client.force_login(cast.outsider)
    elif who == "worker":
        assert cast.worker_one.user is not None
        client.force_login(cast.worker_one.user)
    else:
        client.force_login(cast.researcher)
        study = cast.other_study
    data = {"judge_a_run": setup.run_x.pk, "judge_b_run": setup.run_y.pk, "sample_size": 4}
    assert client.post(post_url(study), data).status_code == 404
    assert not Study.objects.filter(slug__contains="followup").exists()


def test_the_follow_up_action_takes_only_posts(client: Client, cast: Cast, setup: Setup) -> None:
    client.force_login(cast.researcher)
    assert client.get(post_url(setup.study)).status_code == 405
