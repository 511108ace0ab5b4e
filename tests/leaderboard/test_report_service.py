"""The report service on small live data: orders combined, filters applied, bias measured."""

from __future__ import annotations

import pytest

from annotation.models import HumanJudgment, Pair, Study, Worker
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.selectors.frames import VoteFilters, study_votes_get
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair

FAST = ReportParams(ci_rounds=20, elo_rounds=5, bt_rounds=5)


def judge_on(pair: Pair, run: JudgeRun, order: str, preference: str, shown: int) -> None:
    likert = shown if order == "ab" else 9 - shown
    JudgeCall.objects.create(
        run=run,
        pair=pair,
        order=order,
        status=JudgeCall.Status.DONE,
        likert_shown=shown,
        likert=likert,
        preference=preference,
    )


def rate(pair: Pair, worker: Worker, *, a_left: bool, shown: int) -> None:
    likert = shown if a_left else 9 - shown
    preference = "A" if likert <= 3 else "B" if likert >= 6 else "tie"
    HumanJudgment.objects.create(
        study=pair.study,
        pair=pair,
        worker=worker,
        assignment=make_assignment(pair, worker, a_left=a_left),
        a_left=a_left,
        likert_shown=shown,
        likert=likert,
        preference=preference,
    )


@pytest.fixture
def run(cast: Cast) -> JudgeRun:
    judge = Judge.objects.create(name="both orders", kind=Judge.Kind.LLM)
    return JudgeRun.objects.create(judge=judge, study=cast.study, status=JudgeRun.Status.DONE)


def test_a_judge_that_changes_its_mind_when_the_order_is_swapped_votes_tie(
    cast: Cast, run: JudgeRun
) -> None:
    consistent, flipped = make_pair(cast.study, "p1"), make_pair(cast.study, "p2")
    judge_on(consistent, run, "ab", "A", 2)
    judge_on(consistent, run, "ba", "A", 7)
    # Always prefers what it sees first: A when A is first, B when B is first.
    judge_on(flipped, run, "ab", "A", 1)
    judge_on(flipped, run, "ba", "B", 1)
    votes = study_votes_get(study=cast.study, filters=VoteFilters())
    labels = dict(zip(votes.judges["pair_id"], votes.judges["label"], strict=True))
    assert labels == {consistent.pk: "A", flipped.pk: "tie"}

    report = agreement_report_build(study=cast.study, params=FAST)
    bias = report["position_bias"]["both orders"]
    assert bias["flip_rate"]["count"] == 1 and bias["flip_rate"]["total"] == 2
    assert (bias["flip_rate"]["unit"], bias["flip_rate"]["resampled"]) == (
        "pair in both orders",
        "prompt",
    )
    # Three of four decisive calls chose the answer shown first.
    assert (bias["prefers_first"]["count"], bias["prefers_first"]["total"]) == (3, 4)
    assert bias["histogram"]["1"] == 2 and bias["histogram"]["2"] == 1


def test_people_position_bias_counts_the_side_shown_first_not_the_canonical_side(
    cast: Cast,
) -> None:
    pair = make_pair(cast.study, "p1")
    # Both chose the left answer: A for the first, B for the second (B was on the left).
    rate(pair, cast.worker_one, a_left=True, shown=2)
    rate(pair, cast.worker_two, a_left=False, shown=2)
    report = agreement_report_build(study=cast.study, params=FAST)
    people = report["position_bias"]["human"]
    assert (people["prefers_first"]["count"], people["prefers_first"]["total"]) == (2, 2)
    assert people["histogram"]["2"] == 2
    assert report["human_vs_human"]["with_ties"] == {"agree": 0, "total": 1, "rate": 0.0}


def test_filters_keep_only_the_chosen_category_and_leave_gold_out(cast: Cast) -> None:
    writing = make_pair(cast.study, "p1")
    gold = make_pair(cast.study, "p2")
    Pair.objects.filter(pk=gold.pk).update(
        is_gold=True, gold_side="A", gold_kind=Pair.GoldKind.FIRST_VS_LAST
    )
    rate(writing, cast.worker_one, a_left=True, shown=1)
    rate(gold, cast.worker_one, a_left=True, shown=1)
    all_votes = study_votes_get(study=cast.study, filters=VoteFilters())
    assert len(all_votes.human) == 2
    no_gold = study_votes_get(study=cast.study, filters=VoteFilters(exclude_gold=True))
    assert no_gold.human["pair_id"].tolist() == [writing.pk]
    other = study_votes_get(study=cast.study, filters=VoteFilters(category="math"))
    assert other.human.empty and other.pairs.empty


def test_gold_accuracy_counts_votes_naming_the_known_better_side(cast: Cast, run: JudgeRun) -> None:
    gold = make_pair(cast.study, "p1")
    Pair.objects.filter(pk=gold.pk).update(
        is_gold=True, gold_side="A", gold_kind=Pair.GoldKind.FIRST_VS_LAST
    )
    rate(gold, cast.worker_one, a_left=True, shown=1)  # A: correct
    rate(gold, cast.worker_two, a_left=True, shown=4)  # tie: not correct
    judge_on(gold, run, "ab", "B", 7)
    report = agreement_report_build(study=cast.study, params=FAST)
    assert report["gold"]["kinds"] == ["first_vs_last"]
    people = report["gold"]["sources"]["human"]["first_vs_last"]
    assert (people["accuracy"]["count"], people["accuracy"]["total"], people["ties"]) == (1, 2, 1)
    # One correct vote and one tie: 0.5 with a tie wrong, 0.75 with a tie half correct.
    assert (people["accuracy"]["share"], people["accuracy"]["ties_half"]["share"]) == (0.5, 0.75)
    assert (people["accuracy"]["unit"], people["accuracy"]["resampled"]) == ("vote", "prompt")
    judge = report["gold"]["sources"]["both orders"]["first_vs_last"]
    assert (judge["accuracy"]["count"], judge["accuracy"]["total"]) == (0, 1)


def test_ordinal_alpha_is_reported_when_people_give_likert_scores(cast: Cast) -> None:
    for i in range(3):
        pair = make_pair(cast.study, f"p{i}")
        rate(pair, cast.worker_one, a_left=True, shown=1 + 3 * i)
        rate(pair, cast.worker_two, a_left=True, shown=1 + 3 * i)
    report = agreement_report_build(study=cast.study, params=FAST)
    alpha = report["human_vs_human"]["krippendorff_alpha"]
    assert alpha["ordinal_likert"] == 1.0
    assert alpha["nominal_preference"] == 1.0


def test_a_study_without_votes_gives_a_report_with_empty_counts(cast: Cast) -> None:
    report = agreement_report_build(study=Study.objects.get(slug="other-study"), params=FAST)
    assert report["human_vs_human"]["with_ties"] == {"agree": 0, "total": 0, "rate": None}
    assert report["judges"] == {}
