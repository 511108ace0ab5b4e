"""Researchers' worker-quality page, pay review and payouts."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.test import Client

from annotation.models import Assignment, HumanJudgment, PayEntry, Study, Worker
from annotation.selectors.quality import hourly_cents, study_worker_quality
from annotation.services.assignments import assignment_claim_next
from annotation.services.errors import AnnotationError
from annotation.services.pay import pay_entries_review
from tests.annotation.work_helpers import answer_gold, make_pairs, make_worker, submit
from tests.conftest import PASSWORD, Cast


@pytest.fixture
def study(cast: Cast) -> Study:
    study = cast.study
    study.gold_share = Decimal(0)
    study.overlap = 3
    study.pay_per_judgment_cents = 15
    study.save()
    return study


def login(client: Client, username: str) -> Client:
    assert client.login(username=username, password=PASSWORD)
    return client


def judge_all(worker: Worker, *, prefer_left: bool = True) -> None:
    while (assignment := assignment_claim_next(worker=worker)) is not None:
        submit(assignment, likert_shown=2 if prefer_left else 7)


def test_hourly_pay_is_pay_per_judgment_times_judgments_per_hour_at_the_median() -> None:
    assert hourly_cents(pay_per_judgment_cents=15, median_seconds=60) == 900
    assert hourly_cents(pay_per_judgment_cents=20, median_seconds=45) == 1600
    assert hourly_cents(pay_per_judgment_cents=15, median_seconds=None) is None


def test_agreement_with_the_majority_counts_pairs_where_the_others_agree(
    cast: Cast, study: Study
) -> None:
    (pair,) = make_pairs(study, 1)
    third = make_worker(study, "third")
    for worker, left in ((cast.worker_one, True), (cast.worker_two, True), (third, False)):
        assignment = assignment_claim_next(worker=worker)
        assert assignment is not None
        # Make every worker see A on the left so "left" means A for all.
        Assignment.objects.filter(pk=assignment.pk).update(a_left=True)
        assignment.refresh_from_db()
        submit(assignment, likert_shown=2 if left else 7)
    rows = {row.worker.pk: row for row in study_worker_quality(study=study)}
    assert (
        rows[cast.worker_one.pk].majority_compared,
        rows[cast.worker_one.pk].majority_agreed,
    ) == (
        0,
        0,
    )  # the two others disagree: no majority
    assert (rows[third.pk].majority_compared, rows[third.pk].majority_agreed) == (1, 0)


def test_the_page_shows_quality_and_alerts_when_pay_falls_below_the_floor(
    client: Client, cast: Cast, study: Study
) -> None:
    make_pairs(study, 3, gold=2)
    study.gold_share = Decimal(1)
    study.save()
    for _ in range(2):
        assignment = assignment_claim_next(worker=cast.worker_one)
        assert assignment is not None
        answer_gold(assignment, correctly=True)
    study.gold_share = Decimal(0)
    study.save()
    judge_all(cast.worker_one)
    HumanJudgment.objects.update(duration_ms=60_000)  # 15 cents a minute: $9 an hour
    page = login(client, "rhea-researcher").get(f"/studies/{study.slug}/workers/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "PID-wendy-worker" in text and "100% (2/2)" in text
    assert "$9.00 an hour" in text and 'id="pay-alert"' in text
    HumanJudgment.objects.update(duration_ms=20_000)  # $27 an hour
    assert 'id="pay-alert"' not in client.get(f"/studies/{study.slug}/workers/").content.decode()


@pytest.mark.parametrize("who", ["otto-outsider", "wendy-worker"])
def test_only_researchers_of_the_study_see_its_workers(
    client: Client, cast: Cast, study: Study, who: str
) -> None:
    login(client, who)
    assert client.get(f"/studies/{study.slug}/workers/").status_code == 404
    assert client.get(f"/studies/{study.slug}/payouts.csv").status_code == 404
    response = client.post(
        f"/studies/{study.slug}/workers/{cast.worker_one.pk}/action/", {"action": "block"}
    )
    assert response.status_code == 404
    cast.worker_one.refresh_from_db()
    assert cast.worker_one.state == Worker.State.ACTIVE


def test_a_researcher_cannot_act_on_a_worker_of_another_study(
    client: Client, cast: Cast, study: Study
) -> None:
    stranger = make_worker(cast.other_study, "stranger")
    login(client, "rhea-researcher")
    response = client.post(
        f"/studies/{study.slug}/workers/{stranger.pk}/action/", {"action": "block"}
    )
    assert response.status_code == 404


def test_rejection_is_only_for_failed_checks_and_needs_a_reason(cast: Cast, study: Study) -> None:
    make_pairs(study, 2)
    judge_all(cast.worker_one)
    with pytest.raises(AnnotationError, match="reason"):
        pay_entries_review(worker=cast.worker_one, approve=False, reason="")
    with pytest.raises(AnnotationError, match="only for failed checks"):
        pay_entries_review(worker=cast.worker_one, approve=False, reason="too fast")
    Worker.objects.filter(pk=cast.worker_one.pk).update(state=Worker.State.BLOCKED)
    cast.worker_one.refresh_from_db()
    assert pay_entries_review(worker=cast.worker_one, approve=False, reason="failed gold") == 2
    assert set(PayEntry.objects.values_list("status", flat=True)) == {"rejected"}


def test_blocking_from_the_page_stops_the_worker_and_releases_their_item(
    client: Client, cast: Cast, study: Study
) -> None:
    make_pairs(study, 2)
    held = assignment_claim_next(worker=cast.worker_one)
    assert held is not None
    login(client, "rhea-researcher").post(
        f"/studies/{study.slug}/workers/{cast.worker_one.pk}/action/",
        {"action": "block", "reason": "copy-paste answers"},
    )
    held.refresh_from_db()
    cast.worker_one.refresh_from_db()
    assert held.status == Assignment.Status.RETURNED
    assert cast.worker_one.state == Worker.State.BLOCKED
    assert cast.worker_one.state_reason == "copy-paste answers"
    client.post(
        f"/studies/{study.slug}/workers/{cast.worker_one.pk}/action/", {"action": "unblock"}
    )
    cast.worker_one.refresh_from_db()
    assert cast.worker_one.state == Worker.State.ACTIVE


def test_a_returned_worker_gives_back_their_reservation(
    client: Client, cast: Cast, study: Study
) -> None:
    make_pairs(study, 1)
    study.overlap = 1
    study.save()
    held = assignment_claim_next(worker=cast.worker_one)
    assert held is not None and assignment_claim_next(worker=cast.worker_two) is None
    login(client, "rhea-researcher").post(
        f"/studies/{study.slug}/workers/{cast.worker_one.pk}/action/", {"action": "return"}
    )
    assert assignment_claim_next(worker=cast.worker_two) is not None


def test_payouts_export_in_prolific_bonus_format_and_as_a_ledger(
    client: Client, cast: Cast, study: Study
) -> None:
    make_pairs(study, 3)
    judge_all(cast.worker_one)
    judge_all(cast.worker_two)
    pay_entries_review(worker=cast.worker_one, approve=True, reason="")
    login(client, "rhea-researcher")
    client.post(
        f"/studies/{study.slug}/workers/gold-bonus/", {"min_accuracy": "0.9", "amount_cents": "50"}
    )  # nobody has gold judgments: no bonus
    assert not PayEntry.objects.filter(kind="bonus").exists()

    prolific = client.get(f"/studies/{study.slug}/payouts.csv?format=prolific")
    assert prolific["Content-Type"].startswith("text/csv")
    # 3 approved judgments x 15 cents are inside Prolific's reward (the session pay of 20 x 15
    # cents), so no bonus is due: the file holds only what the reward does not pay.
    assert list(csv.reader(io.StringIO(prolific.content.decode()))) == []
    Study.objects.filter(pk=study.pk).update(prolific_reward_cents=30)
    prolific = client.get(f"/studies/{study.slug}/payouts.csv?format=prolific")
    assert list(csv.reader(io.StringIO(prolific.content.decode()))) == [
        ["PID-wendy-worker", "0.15"]
    ]
    ledger = list(
        csv.reader(io.StringIO(client.get(f"/studies/{study.slug}/payouts.csv").content.decode()))
    )
    assert ledger[0][:4] == ["panel", "participant_id", "kind", "amount_cents"]
    assert len(ledger) == 7
    assert {row[4] for row in ledger[1:]} == {"approved", "pending"}


def test_gold_bonuses_go_to_accurate_workers_once(client: Client, cast: Cast, study: Study) -> None:
    study.gold_share = Decimal(1)
    study.gold_min_items = 2
    study.save()
    make_pairs(study, 0, gold=3)
    for worker, correct in ((cast.worker_one, True), (cast.worker_two, False)):
        for _ in range(2):
            assignment = assignment_claim_next(worker=worker)
            assert assignment is not None
            answer_gold(assignment, correctly=correct)
    login(client, "rhea-researcher")
    for _ in range(2):
        client.post(
            f"/studies/{study.slug}/workers/gold-bonus/",
            {"min_accuracy": "0.9", "amount_cents": "50"},
        )
    bonuses = PayEntry.objects.filter(kind="bonus")
    assert [(b.worker_id, b.amount_cents) for b in bonuses] == [(cast.worker_one.pk, 50)]


def test_the_workers_page_reads_a_fixed_number_of_queries_however_many_workers(
    client: Client, cast: Cast, study: Study, django_assert_max_num_queries
) -> None:
    make_pairs(study, 2)
    for i in range(12):
        judge_all(make_worker(study, f"extra{i}"))
    login(client, "rhea-researcher")
    # 12, and 2 for the bonus batches sent through Prolific (their lines, the batch list).
    with django_assert_max_num_queries(14):
        page = client.get(f"/studies/{study.slug}/workers/")
    assert page.status_code == 200 and page.content.count(b'id="worker-') == 14
