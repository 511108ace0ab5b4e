"""The agreement section of an active study weights each human vote by one over the propensity
its assignment's draw recorded (Hajek); a uniform study's report has no weighted agreement."""

from __future__ import annotations

import pytest

from annotation.models import Assignment, HumanJudgment, Pair, Study
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.report.base import RenderContext
from leaderboard.report.registry import SECTIONS
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.annotation.work_helpers import make_pairs, make_worker
from tests.conftest import Cast
from tests.factories import make_assignment

pytestmark = pytest.mark.django_db

FAST = ReportParams(ci_rounds=50, elo_rounds=3, bt_rounds=3)


def judged_study(study: Study, selection: str) -> list[Pair]:
    """Four regular pairs and a gold one; a judge says A on every pair; one person votes on
    each: A (propensity 0.5), B (0.1), A (0.2), B (none recorded), and B on the gold pair."""
    Study.objects.filter(pk=study.pk).update(selection=selection)
    study.refresh_from_db()
    *pairs, gold = make_pairs(study, 4, gold=1)
    run = JudgeRun.objects.create(
        judge=Judge.objects.create(name="all-A", kind=Judge.Kind.LLM),
        study=study,
        status=JudgeRun.Status.DONE,
    )
    worker = make_worker(study, "w")
    for pair, vote, propensity in (
        (pairs[0], "A", 0.5),
        (pairs[1], "B", 0.1),
        (pairs[2], "A", 0.2),
        (pairs[3], "B", None),
        (gold, "B", None),
    ):
        JudgeCall.objects.create(run=run, pair=pair, order="ab", status="done", preference="A")
        assignment = make_assignment(pair, worker)
        Assignment.objects.filter(pk=assignment.pk).update(propensity=propensity)
        HumanJudgment.objects.create(
            study=study,
            pair=pair,
            worker=worker,
            assignment=assignment,
            a_left=True,
            preference=vote,
        )
    return pairs


def test_an_active_studys_agreement_weights_each_vote_by_its_propensity(cast: Cast) -> None:
    judged_study(cast.study, "active")
    payload = agreement_report_build(study=cast.study, params=FAST)
    (judge,) = payload["judges"].values()
    weighted = judge["vs_human"]["weighted"]
    # Agreeing votes weigh 1/0.5 and 1/0.2; the others 1/0.1 and, unrecorded, 1/k with k = 4
    # regular pairs: (2 + 5) / (2 + 10 + 5 + 4) = 1/3. The gold pair is left out; the plain
    # vote-level rate (gold included) is 2 of 5.
    assert weighted["estimate"] == pytest.approx(7 / 21)
    assert (weighted["votes"], weighted["recorded"], weighted["prompts"]) == (4, 3, 4)
    assert weighted["method"] == "hajek"
    assert 0 <= weighted["lower"] <= weighted["estimate"] <= weighted["upper"] <= 1
    assert judge["vs_human"]["with_ties"]["rate"] == pytest.approx(2 / 5)
    section = next(s for s in SECTIONS if s.key == "agreement")
    result = section.load(payload)
    context = RenderContext(sources=("human", "all-A"), definition=section.definition)
    tables = section.tables(result, context)
    rows = [row for table in tables for row in table.rows]
    assert any("propensity-weighted (Hajek" in str(row[1]) for row in rows)


def test_a_uniform_studys_report_has_no_weighted_agreement(cast: Cast) -> None:
    judged_study(cast.study, "uniform")
    payload = agreement_report_build(study=cast.study, params=FAST)
    (judge,) = payload["judges"].values()
    assert judge["vs_human"]["weighted"] is None
    assert judge["vs_human"]["poststratified"] is None
    assert judge["vs_human"]["weighted_without_ties"] is None
    assert judge["vs_human"]["poststratified_without_ties"] is None


def test_an_active_studys_agreement_is_post_stratified_by_the_judges_verdicts(cast: Cast) -> None:
    pairs = judged_study(cast.study, "active")
    # A second judge says B on the second pair only: the judges now dispute that pair.
    other = JudgeRun.objects.create(
        judge=Judge.objects.create(name="one-B", kind=Judge.Kind.LLM),
        study=cast.study,
        status=JudgeRun.Status.DONE,
    )
    JudgeCall.objects.create(run=other, pair=pairs[1], order="ab", status="done", preference="B")
    payload = agreement_report_build(study=cast.study, params=FAST)
    judges = {j["judge"]: j["vs_human"] for j in payload["judges"].values()}
    post = judges["all-A"]["poststratified"]
    # Undisputed, decisive: pairs 1, 3 and 4 (3 of the 4 pairs), votes A (1/0.5), A (1/0.2) and
    # B (unrecorded, 1/4): 7 / 11. Disputed: pair 2, its one vote B disagrees: 0. So 3/4 * 7/11,
    # where the Hajek mean over the votes (7 / 21) leaves the strata's shares to the weights.
    assert post["estimate"] == pytest.approx(3 / 4 * 7 / 11)
    assert judges["all-A"]["weighted"]["estimate"] == pytest.approx(7 / 21)
    assert (post["method"], post["votes"], post["recorded"], post["prompts"]) == (
        "poststratified",
        4,
        3,
        4,
    )
    assert 0 <= post["lower"] <= post["estimate"] <= post["upper"] <= 1
    # The second judge voted on the disputed pair only, whose one vote agrees with it.
    assert judges["one-B"]["poststratified"]["estimate"] == pytest.approx(1.0)
    section = next(s for s in SECTIONS if s.key == "agreement")
    tables = section.tables(
        section.load(payload),
        RenderContext(sources=("human", "all-A", "one-B"), definition=section.definition),
    )
    rows = [row for table in tables for row in table.rows]
    assert any("post-stratified by the judges' verdicts" in str(row[1]) for row in rows)
    # The post-stratified row comes first and the Hajek row says why it reads high in a live
    # study (the overlap cap fills the disputed pairs first).
    mine = [row for row in rows if row[0] == "all-A vs human" and "active selection" in row[1]]
    assert [row[1] for row in mine] == [
        "agreement with ties, post-stratified by the judges' verdicts (Hajek within strata; "
        "active selection)",
        "agreement with ties, propensity-weighted (Hajek; active selection)",
        "agreement without ties, post-stratified by the judges' verdicts (Hajek within strata; "
        "active selection)",
        "agreement without ties, propensity-weighted (Hajek; active selection)",
    ]
    assert "read the post-stratified row above" in mine[1][5]


def test_an_active_studys_agreement_without_ties_leaves_ties_out_of_the_comparison(
    cast: Cast,
) -> None:
    pairs = judged_study(cast.study, "active")
    # A second person votes tie on the first pair (propensity 0.5); a second judge votes on the
    # third pair only, tie in both orders.
    worker = make_worker(cast.study, "w2")
    assignment = make_assignment(pairs[0], worker)
    Assignment.objects.filter(pk=assignment.pk).update(propensity=0.5)
    HumanJudgment.objects.create(
        study=cast.study,
        pair=pairs[0],
        worker=worker,
        assignment=assignment,
        a_left=True,
        preference="tie",
    )
    split = JudgeRun.objects.create(
        judge=Judge.objects.create(name="split", kind=Judge.Kind.LLM),
        study=cast.study,
        status=JudgeRun.Status.DONE,
    )
    for order in ("ab", "ba"):
        JudgeCall.objects.create(
            run=split, pair=pairs[2], order=order, status="done", preference="tie"
        )
    payload = agreement_report_build(study=cast.study, params=FAST)
    judges = {j["judge"]: j["vs_human"] for j in payload["judges"].values()}
    all_a = judges["all-A"]
    # With ties the tie vote disagrees with "A" (weight 2): 7 / 23. Without ties it makes no
    # comparison: 7 / 21 over the 4 other votes (3 with a recorded propensity).
    assert all_a["weighted"]["estimate"] == pytest.approx(7 / 23)
    s2 = all_a["weighted_without_ties"]
    assert s2["estimate"] == pytest.approx(7 / 21)
    assert (s2["votes"], s2["recorded"], s2["method"]) == (4, 3, "hajek")
    # Post-stratified: pair 3 is disputed now (stratum of 1 pair, its vote agrees: a = d = 1);
    # the other 3 pairs' votes weigh 2 (A), 2 (tie), 10 (B), 4 (B): a-bar 2/18, d-bar 16/18.
    # With ties 3/4 * 2/18 + 1/4 = 1/3; without (3 * 2/18 + 1) / (3 * 16/18 + 1) = 4/11.
    assert all_a["poststratified"]["estimate"] == pytest.approx(1 / 3)
    assert all_a["poststratified_without_ties"]["estimate"] == pytest.approx(4 / 11)
    # The tying judge's one pair: the vote A disagrees with ties; without ties nothing is
    # compared.
    assert judges["split"]["weighted"]["estimate"] == pytest.approx(0.0)
    assert judges["split"]["weighted_without_ties"] is None
    assert judges["split"]["poststratified_without_ties"] is None
    section = next(s for s in SECTIONS if s.key == "agreement")
    tables = section.tables(
        section.load(payload),
        RenderContext(sources=("human", "all-A", "split"), definition=section.definition),
    )
    statistics = [str(row[1]) for table in tables for row in table.rows]
    assert "agreement without ties, propensity-weighted (Hajek; active selection)" in statistics
    assert any(s.startswith("agreement without ties, post-stratified") for s in statistics)
