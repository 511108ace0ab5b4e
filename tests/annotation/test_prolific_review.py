"""Approve, reject and return Prolific submissions from the workers page, and reconcile their
statuses, against the local fake of Prolific's API over real HTTP (fake_prolific.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.test import Client

from annotation.models import PayEntry, Study, Worker
from annotation.roles import Role
from annotation.services.prolific import prolific_token_set
from annotation.services.prolific_review import submissions_reconcile_all
from annotation.tasks import prolific_submissions_reconcile_task
from tests.annotation.fake_prolific import TOKEN, FakeProlific, Fault, fake_serve
from tests.annotation.test_bonus import ledger
from tests.conftest import Cast, make_user

PROLIFIC_STUDY = "STUDY1"
# Prolific requires at least 100 characters saying why.
WHY = (
    "Your answers to the check items were wrong on 5 of 6, and the study's instructions said "
    "these items decide whether the work can be accepted."
)


@pytest.fixture
def fake(settings) -> Iterator[FakeProlific]:
    yield from fake_serve(settings, study_id=PROLIFIC_STUDY)


@pytest.fixture
def study(cast: Cast, fake: FakeProlific) -> Study:
    """Both workers submitted on Prolific (awaiting review) with 3 pending judgments each."""
    Study.objects.filter(pk=cast.study.pk).update(prolific_study_id=PROLIFIC_STUDY)
    cast.study.refresh_from_db()
    prolific_token_set(study=cast.study, token=TOKEN)
    for worker in (cast.worker_one, cast.worker_two):
        submission = fake.submission_add(
            study_id=PROLIFIC_STUDY, participant_id=worker.external_id, status="AWAITING REVIEW"
        )
        Worker.objects.filter(pk=worker.pk).update(panel_session_id=submission["id"])
        worker.refresh_from_db()
        ledger(worker, judgments=3, each=20, status="pending")
    return cast.study


@pytest.fixture
def researcher(client: Client, cast: Cast) -> Client:
    client.force_login(cast.researcher)
    return client


def review(client: Client, study: Study, action: str, *workers: Worker, **fields: object) -> str:
    response = client.post(
        f"/studies/{study.slug}/workers/prolific-review/",
        {"action": action, "worker": [w.pk for w in workers], **fields},
        follow=True,
    )
    assert response.status_code == 200
    return response.content.decode()


def on_prolific(fake: FakeProlific, worker: Worker) -> str:
    return str(fake.submissions[worker.panel_session_id]["status"])


def entries(worker: Worker) -> list[str]:
    return sorted(PayEntry.objects.filter(worker=worker).values_list("status", flat=True))


def test_bulk_approve_is_one_request_by_submission_id_then_approves_the_pay_here(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    page = review(researcher, study, "approve", cast.worker_one, cast.worker_two)
    (call,) = fake.calls("POST", "/api/v1/submissions/bulk-approve/")
    assert sorted(call.body["submission_ids"]) == sorted(
        [cast.worker_one.panel_session_id, cast.worker_two.panel_session_id]
    )
    assert call.authorization == f"Token {TOKEN}"
    assert on_prolific(fake, cast.worker_one) == on_prolific(fake, cast.worker_two) == "APPROVED"
    assert entries(cast.worker_one) == entries(cast.worker_two) == ["approved"] * 3
    assert "2 approved on Prolific" in page and "6 pending pay entries approved here" in page
    assert page.count('<span class="badge">APPROVED</span>') == 2


def test_a_rejection_needs_a_category_and_the_message_prolific_requires_before_any_call(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    page = review(
        researcher,
        study,
        "reject",
        cast.worker_one,
        rejection_category="FAILED_CHECK",
        message="Failed checks.",
    )
    assert "at least 100 characters" in page and "this one has 14" in page
    page = review(researcher, study, "reject", cast.worker_one, message=WHY)
    assert "Choose one of Prolific&#x27;s rejection categories" in page
    assert fake.calls("POST") == []
    assert entries(cast.worker_one) == ["pending"] * 3


def test_bulk_reject_is_one_transition_each_with_category_and_message(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    page = review(
        researcher,
        study,
        "reject",
        cast.worker_one,
        cast.worker_two,
        rejection_category="FAILED_CHECK",
        message=WHY,
    )
    calls = fake.calls("POST", "/api/v1/submissions/")
    assert sorted(c.path for c in calls) == sorted(
        f"/api/v1/submissions/{w.panel_session_id}/transition/"
        for w in (cast.worker_one, cast.worker_two)
    )
    assert all(
        c.body == {"action": "REJECT", "message": WHY, "rejection_category": "FAILED_CHECK"}
        for c in calls
    )
    assert on_prolific(fake, cast.worker_one) == on_prolific(fake, cast.worker_two) == "REJECTED"
    assert entries(cast.worker_one) == entries(cast.worker_two) == ["rejected"] * 3
    reason = PayEntry.objects.filter(worker=cast.worker_one).values_list("reason", flat=True)[0]
    assert reason.startswith("Rejected on Prolific by rhea-researcher (Failed attention or gold")
    assert "2 rejected on Prolific" in page


def test_a_failure_names_the_participant_and_changes_nothing_for_them(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    down = cast.worker_one
    fake.inject(Fault(kind="503", path=f"/api/v1/submissions/{down.panel_session_id}/"))
    page = review(
        researcher,
        study,
        "reject",
        cast.worker_one,
        cast.worker_two,
        rejection_category="LOW_EFFORT",
        message=WHY,
    )
    assert "prolific:PID-wendy-worker: not changed. Prolific answered 503; try again later." in page
    assert entries(down) == ["pending"] * 3 and on_prolific(fake, down) == "AWAITING REVIEW"
    assert entries(cast.worker_two) == ["rejected"] * 3
    assert "1 rejected on Prolific: prolific:PID-walt-worker" in page


def test_prolifics_own_reason_is_shown_when_it_refuses_a_transition(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    fake.submission_set(cast.worker_one.panel_session_id, "ACTIVE")  # not submitted yet
    page = review(
        researcher, study, "reject", cast.worker_one, rejection_category="LOW_EFFORT", message=WHY
    )
    assert "Prolific refused the request (400): Cannot transition a submission in ACTIVE" in page
    assert entries(cast.worker_one) == ["pending"] * 3


def test_a_bulk_approve_outage_approves_nobody_here(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    fake.inject(Fault(kind="timeout", path="/api/v1/submissions/bulk-approve/", seconds=1.5))
    page = review(researcher, study, "approve", cast.worker_one, cast.worker_two)
    assert page.count("not changed. Prolific did not answer in time.") == 2
    assert entries(cast.worker_one) == entries(cast.worker_two) == ["pending"] * 3


def test_asking_to_return_goes_through_prolific_and_the_return_arrives_by_reconciling(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    page = review(
        researcher,
        study,
        "return",
        cast.worker_one,
        return_reason=["Encountered technical problems"],
        return_other="",
    )
    (call,) = fake.calls("POST", "/api/v1/submissions/")
    assert call.path == f"/api/v1/submissions/{cast.worker_one.panel_session_id}/request-return/"
    assert call.body == {"request_return_reasons": ["Encountered technical problems"]}
    assert "return asked" in page
    cast.worker_one.refresh_from_db()
    assert cast.worker_one.prolific_return_requested_at is not None
    assert cast.worker_one.state == Worker.State.ACTIVE  # only once they have returned it
    fake.submission_set(cast.worker_one.panel_session_id, "RETURNED")
    page = researcher.post(
        f"/studies/{study.slug}/workers/prolific-reconcile/", follow=True
    ).content.decode()
    assert "Read 2 submissions from Prolific: 2 changed status, 1 returned here" in page
    cast.worker_one.refresh_from_db()
    assert cast.worker_one.state == Worker.State.RETURNED
    assert cast.worker_one.prolific_status == "RETURNED"
    # Returned submissions are not paid the reward: the pending judgments stay to be decided.
    assert entries(cast.worker_one) == ["pending"] * 3


def test_a_return_request_needs_a_reason(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    page = review(researcher, study, "return", cast.worker_one, return_other="  ")
    assert "Give at least one reason" in page and fake.calls("POST") == []


def test_reconciling_carries_decisions_taken_on_prolific_and_never_overwrites_concords(
    cast: Cast, study: Study, fake: FakeProlific
) -> None:
    fake.submission_set(cast.worker_one.panel_session_id, "APPROVED")
    fake.submission_set(cast.worker_two.panel_session_id, "REJECTED")
    # One of walt's judgments was already approved in Concord: the reject on Prolific leaves it.
    first = PayEntry.objects.filter(worker=cast.worker_two).first()
    assert first is not None
    PayEntry.objects.filter(pk=first.pk).update(status="approved")
    fake.submission_add(study_id=PROLIFIC_STUDY)  # started on Prolific, never came here
    assert prolific_submissions_reconcile_task() == 1
    assert entries(cast.worker_one) == ["approved"] * 3
    assert entries(cast.worker_two) == ["approved", "rejected", "rejected"]
    cast.worker_two.refresh_from_db()
    assert cast.worker_two.prolific_status == "REJECTED" and cast.worker_two.prolific_status_at
    study.refresh_from_db()
    assert study.prolific_reconciled_at is not None
    # A second run changes nothing more (statuses equal, nothing pending).
    (listed,) = {tuple(c.query["study"]) for c in fake.calls("GET", "/api/v1/submissions/")}
    assert listed == (PROLIFIC_STUDY,)
    assert submissions_reconcile_all() == 1
    assert entries(cast.worker_two) == ["approved", "rejected", "rejected"]


def test_the_periodic_reconciliation_logs_an_outage_and_changes_nothing(
    cast: Cast, study: Study, fake: FakeProlific, caplog
) -> None:
    caplog.set_level(logging.WARNING)
    fake.submission_set(cast.worker_one.panel_session_id, "APPROVED")
    fake.inject(Fault(kind="500", path="/api/v1/submissions/"))
    assert submissions_reconcile_all() == 0
    assert "Prolific reconciliation of study" in caplog.text and "500" in caplog.text
    assert entries(cast.worker_one) == ["pending"] * 3
    assert TOKEN not in caplog.text


def test_only_the_studys_researchers_review_and_nobody_else_reaches_prolific(
    client: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    stranger = make_user("remy-researcher", Role.RESEARCHER)  # a researcher, not of this study
    annotator = cast.worker_one.user
    assert annotator is not None
    for user in (cast.outsider, stranger, annotator):
        client.force_login(user)
        for path in ("prolific-review/", "prolific-reconcile/"):
            response = client.post(
                f"/studies/{study.slug}/workers/{path}",
                {"action": "approve", "worker": [cast.worker_one.pk]},
            )
            assert response.status_code == 404, (user, path)
    client.logout()
    response = client.post(
        f"/studies/{study.slug}/workers/prolific-review/",
        {"action": "approve", "worker": [cast.worker_one.pk]},
    )
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert fake.requests == []
    assert entries(cast.worker_one) == ["pending"] * 3
    client.force_login(cast.researcher)
    review(client, study, "approve", cast.worker_one)
    assert entries(cast.worker_one) == ["approved"] * 3


def test_a_participant_of_another_study_cannot_be_ticked(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    elsewhere = Worker.objects.create(
        study=cast.other_study, panel="prolific", external_id="PID-x", panel_session_id="S9"
    )
    page = review(researcher, study, "approve", elsewhere)
    assert "None of the ticked participants is in this study" in page
    assert fake.requests == []


def test_without_a_connection_the_page_offers_no_review_and_a_post_says_why(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_token_encrypted="")
    page = researcher.get(f"/studies/{study.slug}/workers/").content.decode()
    assert 'id="prolific-review"' not in page
    page = review(researcher, study, "approve", cast.worker_one)
    assert "Connect the study to Prolific first" in page
    assert fake.requests == []


def test_the_rows_pay_buttons_say_they_are_for_pay_here_and_never_call_prolific(
    researcher: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    page = researcher.get(f"/studies/{study.slug}/workers/").content.decode()
    row = page[page.index(f'id="worker-{cast.worker_one.pk}"') :]
    row = row[: row.index("</tr>")]
    assert ">Approve pay</button>" in row and ">Reject pay</button>" in row
    assert ">Approve</button>" not in row and ">Reject</button>" not in row
    response = researcher.post(
        f"/studies/{study.slug}/workers/{cast.worker_one.pk}/action/",
        {"action": "approve"},
        follow=True,
    )
    assert "3 pending pay entries approved in Concord (Prolific&#x27;s submission is not" in (
        response.content.decode()
    )
    assert entries(cast.worker_one) == ["approved"] * 3
    assert on_prolific(fake, cast.worker_one) == "AWAITING REVIEW"
    assert fake.requests == []
