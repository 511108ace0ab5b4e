"""The follow-up rationale-only study: sampled from the pairs where two judges disagree, in one
action from the dashboard, opened by a worker with the better answer shown."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Answer, Assignment, HumanJudgment, Pair, Prompt, Study, System
from annotation.selectors.work import pair_rationale_winner
from annotation.services.followup import followup_study_copy
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.models import Followup, FollowupPair
from leaderboard.report.base import RenderContext
from leaderboard.report.registry import section_get
from leaderboard.selectors.followup import Disagreement, judge_disagreements_get
from leaderboard.selectors.frames import VoteFilters
from leaderboard.selectors.section_reads import ORIGIN
from leaderboard.services.followup import followup_study_create
from leaderboard.services.reports import ReportParams, report_data, votes_and_reads_get
from tests.annotation.work_helpers import enter_and_consent, make_pairs, make_worker
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


def _by_prompt(study: Study, rows: list[Disagreement]) -> dict[str, tuple[str, str, str]]:
    names = dict(Pair.objects.filter(study=study).values_list("pk", "prompt__external_id"))
    return {names[d.pair_id]: (d.winner, d.basis, d.agreed) for d in rows}


def test_each_disagreement_says_which_run_voted_the_better_side(setup: Setup) -> None:
    """X votes A, the ranked side, on p0-p9: X agreed. On p10 X votes a tie and Y the better
    side A: Y agreed. On p12-p13 the people's majority B is the better side: Y agreed."""
    found = judge_disagreements_get(
        study=setup.study, judge_a_run=setup.run_x, judge_b_run=setup.run_y
    )
    expected = {f"p{i}": ("A", "ranks", "first") for i in range(10)}
    expected |= {"p10": ("A", "ranks", "second")}
    expected |= {f"p{i}": ("B", "people", "second") for i in (12, 13)}
    assert _by_prompt(setup.study, found) == expected
    assert [(d.first_vote, d.second_vote) for d in found if d.agreed == "second"][0] == ("tie", "A")
    # A tie against the worse side: neither run agreed.
    JudgeCall.objects.filter(run=setup.run_y, pair__prompt__external_id="p10").update(
        preference="B"
    )
    expected["p10"] = ("A", "ranks", "neither")
    found = judge_disagreements_get(
        study=setup.study, judge_a_run=setup.run_x, judge_b_run=setup.run_y
    )
    assert _by_prompt(setup.study, found) == expected
    # The other way round, the first run is Y.
    swapped = judge_disagreements_get(
        study=setup.study, judge_a_run=setup.run_y, judge_b_run=setup.run_x
    )
    flip = {"first": "second", "second": "first", "neither": "neither"}
    assert _by_prompt(setup.study, swapped) == {
        key: (winner, basis, flip[agreed]) for key, (winner, basis, agreed) in expected.items()
    }


def test_a_follow_up_of_the_second_runs_wins_holds_them_and_records_where_it_came_from(
    cast: Cast, setup: Setup
) -> None:
    followup = followup_study_create(
        study=setup.study,
        judge_a_run=setup.run_x,
        judge_b_run=setup.run_y,
        agreeing="second",
        seed=5,
        user=cast.researcher,
    )
    assert followup_pairs(followup) == {"p10": "A", "p12": "B", "p13": "B"}
    origin = Followup.objects.get(study=followup)
    assert (origin.source_study, origin.first_run, origin.second_run) == (
        setup.study,
        setup.run_x,
        setup.run_y,
    )
    assert (origin.first_label, origin.second_label) == (
        f"judge x (run {setup.run_x.pk})",
        f"judge y (run {setup.run_y.pk})",
    )
    assert (origin.agreeing, origin.candidates, origin.seed, origin.sample_size) == (
        "second",
        3,
        5,
        300,
    )
    links = FollowupPair.objects.filter(followup=origin).select_related("pair__prompt")
    assert sorted(
        (link.pair.prompt.external_id, link.basis, link.agreed, link.first_vote) for link in links
    ) == [
        ("p10", "ranks", "second", "tie"),
        ("p12", "people", "second", "A"),
        ("p13", "people", "second", "A"),
    ]
    assert all(link.pair.study == followup for link in links)
    assert [link.second_vote for link in links] == [link.pair.rationale_winner for link in links]
    assert "voted the better side" in followup.notes and "second on 3" in followup.notes


def test_a_follow_up_with_an_unknown_filter_or_none_left_creates_nothing(
    cast: Cast, setup: Setup
) -> None:
    with pytest.raises(ValidationError, match="agreeing must be one of"):
        followup_study_create(
            study=setup.study,
            judge_a_run=setup.run_x,
            judge_b_run=setup.run_y,
            agreeing="both",
            user=cast.researcher,
        )
    # Y votes like X except on p3, where X votes the better side: no disagreement is left where
    # the second run agreed.
    JudgeCall.objects.filter(run=setup.run_y).update(preference="A")
    y_calls = JudgeCall.objects.filter(run=setup.run_y)
    y_calls.filter(pair__prompt__external_id="p3").update(preference="B")
    y_calls.filter(pair__prompt__external_id="p10").update(preference="tie")
    with pytest.raises(ValidationError, match="where the second run agreed"):
        followup_study_create(
            study=setup.study,
            judge_a_run=setup.run_x,
            judge_b_run=setup.run_y,
            agreeing="second",
            user=cast.researcher,
        )
    assert not Study.objects.filter(slug__contains="followup").exists()
    assert not Followup.objects.exists()


def test_a_copy_that_names_its_sides_anew_records_the_votes_in_its_own_terms(
    cast: Cast,
) -> None:
    """One prompt, answers ranked 1 < 2 < 3, pairs (1, 3) then (2, 3): the second copy's answer
    3 was copied before answer 2, so the copy's A is the original's B."""
    study = cast.study
    prompt = Prompt.objects.create(study=study, external_id="q", turns=["Q?"])
    answers = [
        Answer.objects.create(
            prompt=prompt,
            system=System.objects.create(study=study, name=f"s{rank}"),
            turns=[f"answer {rank}"],
            rank=rank,
        )
        for rank in (1, 2, 3)
    ]
    first = Pair.objects.create(
        study=study, prompt=prompt, answer_a=answers[0], answer_b=answers[2]
    )
    second = Pair.objects.create(
        study=study, prompt=prompt, answer_a=answers[1], answer_b=answers[2]
    )
    run_x = JudgeRun.objects.create(
        judge=Judge.objects.create(name="judge x", kind="llm"), study=study, status="done"
    )
    run_y = JudgeRun.objects.create(
        judge=Judge.objects.create(name="judge y", kind="llm"), study=study, status="done"
    )
    for pair in (first, second):
        _call(run_x, pair, "A")
        _call(run_y, pair, "B")
    followup = followup_study_create(
        study=study, judge_a_run=run_x, judge_b_run=run_y, user=cast.researcher
    )
    links = {
        link.source_pair_id: link
        for link in FollowupPair.objects.filter(followup__study=followup).select_related("pair")
    }
    assert (links[first.pk].pair.rationale_winner, links[first.pk].first_vote) == ("A", "A")
    flipped = links[second.pk]
    assert flipped.pair.answer_a.rank == 3 and flipped.pair.rationale_winner == "B"
    assert (flipped.first_vote, flipped.second_vote, flipped.agreed) == ("B", "A", "first")


def _copied_rows(study: Study) -> list[tuple[object, ...]]:
    # Three plain reads rather than one five-way join, whose plan on a test table's stale
    # statistics can take minutes.
    prompts = {prompt.pk: prompt for prompt in Prompt.objects.filter(study=study)}
    answers = {
        answer.pk: answer
        for answer in Answer.objects.filter(prompt__study=study).select_related("system")
    }
    rows = []
    for pair in Pair.objects.filter(study=study):
        a, b = answers[pair.answer_a_id], answers[pair.answer_b_id]
        rows.append(
            (
                prompts[pair.prompt_id].external_id,
                prompts[pair.prompt_id].turns,
                a.system.name,
                a.turns,
                a.rank,
                b.system.name,
                b.turns,
                pair.rationale_winner,
                a.prompt_id == b.prompt_id == pair.prompt_id,
                a.pk < b.pk,
            )
        )
    return sorted(rows)


def test_copying_pairs_into_a_follow_up_takes_the_same_statements_for_3_or_300_pairs(
    cast: Cast,
) -> None:
    few = make_pairs(cast.study, 3, prefix="few")
    many = make_pairs(cast.study, 300, prefix="many")
    counts = []
    for pairs in (few, many):
        winners = {pair.pk: "A" if pair.pk % 2 else "B" for pair in pairs}
        with CaptureQueriesContext(connection) as queries:
            copy = followup_study_copy(
                study=cast.study, winners=winners, notes="", user=cast.researcher
            )
        counts.append(len(queries))
        assert len(copy.pair_of) == len(pairs)
        assert Prompt.objects.filter(study=copy.study).count() == len(pairs)
        assert System.objects.filter(study=copy.study).count() == 2
        # Each copy holds its original's texts, ranks and winner, in canonical order.
        originals = {pair.prompt.external_id: (pair, winners[pair.pk]) for pair in pairs}
        assert _copied_rows(copy.study) == sorted(
            (
                key,
                pair.prompt.turns,
                pair.answer_a.system.name,
                pair.answer_a.turns,
                pair.answer_a.rank,
                pair.answer_b.system.name,
                pair.answer_b.turns,
                winner,
                True,
                True,
            )
            for key, (pair, winner) in originals.items()
        )
    # The lock, the pairs, the slugs, the study, one INSERT per table (prompts, systems, answers,
    # pairs), the membership (a read, an insert in its savepoint) and the transaction's savepoint:
    # not one INSERT per row (1,000 and more for 300 pairs before).
    assert counts[0] == counts[1] == PINNED_COPY_STATEMENTS, counts


PINNED_COPY_STATEMENTS = 14


def form_data(setup: Setup, **fields: object) -> dict[str, object]:
    """The follow-up form's fields for runs X then Y, sample size 300 and seed 1, with changes."""
    data: dict[str, object] = {
        "judge_a_run": setup.run_x.pk,
        "judge_b_run": setup.run_y.pk,
        "sample_size": 300,
        "seed": 1,
    }
    return data | fields


def preview_url(study: Study) -> str:
    return reverse("leaderboard:study_followup_preview", kwargs={"slug": study.slug})


def test_the_form_counts_the_disagreements_by_which_run_agreed_before_creating_anything(
    client: Client, cast: Cast, setup: Setup
) -> None:
    client.force_login(cast.researcher)
    data = form_data(setup, agreeing="first", sample_size=4)
    response = client.post(preview_url(setup.study), data)
    assert response.status_code == 200
    page = response.content.decode()
    counts = page[page.index('id="followup-counts"') : page.index("</table>")]
    cells = [c.split("</td>")[0] for c in counts.split("<td>")[1:]]
    # first, second, neither, then the total after its row header.
    assert (cells[1:6:2], cells[-1]) == (["10", "3", "0"], "13")
    assert "Disagreements without a known better answer (not sampled): 2." in page
    assert "the follow-up gets 4 of 10 pairs" in page
    assert '<option value="first" selected>' in page
    assert not Study.objects.filter(slug__contains="followup").exists()
    assert client.get(preview_url(setup.study)).status_code == 405
    client.force_login(cast.outsider)
    assert client.post(preview_url(setup.study), data).status_code == 404


def test_the_dashboard_creates_a_follow_up_of_the_first_runs_wins(
    client: Client, cast: Cast, setup: Setup
) -> None:
    client.force_login(cast.researcher)
    response = client.post(post_url(setup.study), form_data(setup, agreeing="first"))
    assert response["Location"] == "/studies/main-study-followup-1/"
    links = FollowupPair.objects.filter(followup__study__slug="main-study-followup-1")
    assert links.count() == 10 and set(links.values_list("agreed", flat=True)) == {"first"}


def test_the_report_of_a_follow_up_splits_the_values_by_which_run_voted_the_better_answer(
    cast: Cast, setup: Setup
) -> None:
    """Fig. 4's two bars: on X's 10 wins people cite clarity, on Y's 3 wins ethics too."""
    followup = followup_study_create(
        study=setup.study, judge_a_run=setup.run_x, judge_b_run=setup.run_y, user=cast.researcher
    )
    worker = make_worker(followup, "why")
    agreed = dict(
        FollowupPair.objects.filter(followup__study=followup).values_list("pair_id", "agreed")
    )
    for pair in Pair.objects.filter(study=followup):
        HumanJudgment.objects.create(
            study=followup,
            pair=pair,
            worker=worker,
            assignment=make_assignment(pair, worker),
            preference=pair.rationale_winner,
            values=["clarity"] if agreed[pair.pk] == "first" else ["clarity", "ethics"],
        )
    votes, reads = votes_and_reads_get(study=followup, filters=VoteFilters())
    section = section_get("rationale")
    result = section.load(
        section.dump(section.compute(report_data(votes=votes, reads=reads, params=ReportParams())))
    )
    split = result.followup
    assert split is not None and split.source_study == "main-study"
    assert (split.first, split.second, split.agreeing) == (
        f"judge x (run {setup.run_x.pk})",
        f"judge y (run {setup.run_y.pk})",
        "any",
    )
    shares = {
        g.agreed: (g.pairs, g.judgments, {v.value: v.share for v in g.values if v.count})
        for g in split.groups
    }
    assert shares == {
        "first": (10, 10, {"clarity": 1.0}),
        "second": (3, 3, {"clarity": 1.0, "ethics": 1.0}),
    }
    context = RenderContext(sources=("human",), definition="")
    rows = section.tables(result, context)[0].rows
    # scope, value, judgments, count, citing share (its interval and unit follow).
    assert (
        f"follow-up: judge y (run {setup.run_y.pk}) voted the better answer (3 pairs)",
        "ethics",
        3,
        3,
        1.0,
    ) in {row[:5] for row in rows}
    plots = {plot.name: plot for plot in section.plots(result, context)}
    assert "judge x" in plots["rationale-followup"].svg
    # The source study's own report has no split.
    votes, reads = votes_and_reads_get(study=setup.study, filters=VoteFilters())
    assert reads[ORIGIN.key].followup is None
