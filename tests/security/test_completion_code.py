"""The full completion code only at the target or when out of work; stopping early is partial."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from annotation.models import Assignment, Pair, Study, Worker
from annotation.services.assignments import assignment_claim
from annotation.services.studies import study_settings_update
from annotation.services.workers import worker_completion_code, worker_finish
from tests.annotation.work_helpers import enter_and_consent, make_pairs, make_worker, submit
from tests.conftest import Cast


@pytest.fixture
def study(cast: Cast) -> Study:
    study = cast.study
    study.gold_share = Decimal(0)
    study.target_per_worker = 3
    study.completion_code = "FULLCODE"
    study.partial_completion_code = "PARTCODE"
    study.save()
    return study


def judge(client: Client, study: Study, count: int) -> None:
    for _ in range(count):
        response = client.get(f"/work/{study.slug}/")
        assert "/item/" in response["Location"]
        public_id = response["Location"].rstrip("/").rsplit("/", 1)[-1]
        assignment = Assignment.objects.get(public_id=public_id)
        client.post(
            f"/work/{study.slug}/item/{assignment.public_id}/",
            {"submission_id": str(uuid.uuid4()), "likert": "2"},
        )


def test_finish_now_after_one_of_three_gives_only_the_partial_code(
    client: Client, study: Study
) -> None:
    make_pairs(study, 5)
    enter_and_consent(client, study, "PID1")
    judge(client, study, 1)
    body = client.post(f"/work/{study.slug}/stop/", follow=True).content
    assert b"PARTCODE" in body and b"FULLCODE" not in body
    assert b"cc=PARTCODE" in body


def test_reaching_the_target_gives_the_full_code(client: Client, study: Study) -> None:
    make_pairs(study, 5)
    enter_and_consent(client, study, "PID1")
    judge(client, study, 3)
    body = client.get(f"/work/{study.slug}/", follow=True).content
    assert b"FULLCODE" in body and b"PARTCODE" not in body


def test_running_out_of_work_gives_the_full_code(client: Client, study: Study) -> None:
    make_pairs(study, 2)
    enter_and_consent(client, study, "PID1")
    judge(client, study, 2)
    body = client.get(f"/work/{study.slug}/", follow=True).content
    assert b"FULLCODE" in body


def test_stopping_early_without_a_partial_code_shows_no_code(client: Client, study: Study) -> None:
    Study.objects.filter(pk=study.pk).update(partial_completion_code="")
    make_pairs(study, 5)
    enter_and_consent(client, study, "PID1")
    judge(client, study, 1)
    body = client.post(f"/work/{study.slug}/stop/", follow=True).content
    assert b"FULLCODE" not in body and b"no code for a partial completion" in body


def test_stopping_after_reaching_the_target_still_gives_the_full_code(
    client: Client, study: Study
) -> None:
    Study.objects.filter(pk=study.pk).update(target_per_worker=1)
    make_pairs(study, 5)
    enter_and_consent(client, study, "PID1")
    judge(client, study, 1)
    body = client.post(f"/work/{study.slug}/stop/", follow=True).content
    assert b"FULLCODE" in body


def hold_remaining(study: Study, *, minutes: int = 10) -> list[Assignment]:
    """Other workers reserve every pair nobody has submitted yet."""
    held = []
    free = Pair.objects.filter(study=study).exclude(assignments__status=Assignment.Status.SUBMITTED)
    for i, pair in enumerate(free):
        held.append(
            Assignment.objects.create(
                study=study,
                pair=pair,
                worker=make_worker(study, f"holder{i}"),
                a_left=True,
                reserved_at=timezone.now(),
                expires_at=timezone.now() + timedelta(minutes=minutes),
            )
        )
    return held


@pytest.fixture
def six(study: Study) -> Study:
    Study.objects.filter(pk=study.pk).update(overlap=1, target_per_worker=6)
    study.refresh_from_db()
    make_pairs(study, 6)
    return study


def test_one_of_six_while_others_hold_the_rest_is_not_the_full_code(
    client: Client, six: Study
) -> None:
    worker = enter_and_consent(client, six, "PID1")
    judge(client, six, 1)
    hold_remaining(six)
    response = client.get(f"/work/{six.slug}/")
    assert response.status_code == 200
    assert b"Come back in a few minutes" in response.content
    assert b'http-equiv="refresh"' in response.content
    assert b"FULLCODE" not in response.content
    worker.refresh_from_db()
    assert worker.state == Worker.State.ACTIVE  # not finished: the page checks again
    assert b"FULLCODE" not in client.get(f"/work/{six.slug}/done/", follow=True).content
    # Finishing now is a partial completion.
    body = client.post(f"/work/{six.slug}/stop/", follow=True).content
    assert b"PARTCODE" in body and b"FULLCODE" not in body


def test_the_waiting_worker_gets_an_item_once_a_held_one_runs_out(
    client: Client, six: Study
) -> None:
    enter_and_consent(client, six, "PID1")
    judge(client, six, 1)
    held = hold_remaining(six)
    assert b"Come back" in client.get(f"/work/{six.slug}/").content
    Assignment.objects.filter(pk=held[0].pk).update(expires_at=timezone.now())
    response = client.get(f"/work/{six.slug}/")
    assert "/item/" in response["Location"]


def test_the_full_code_once_the_others_submitted_what_they_held(client: Client, six: Study) -> None:
    enter_and_consent(client, six, "PID1")
    judge(client, six, 1)
    held = hold_remaining(six)
    assert b"FULLCODE" not in client.get(f"/work/{six.slug}/", follow=True).content
    Assignment.objects.filter(pk__in=[a.pk for a in held]).update(
        status=Assignment.Status.SUBMITTED
    )
    body = client.get(f"/work/{six.slug}/", follow=True).content
    assert b"FULLCODE" in body and b"PARTCODE" not in body


def test_the_api_says_wait_while_others_hold_the_rest(client: Client, six: Study) -> None:
    enter_and_consent(client, six, "PID1")
    judge(client, six, 1)
    held = hold_remaining(six)
    body = client.post(f"/work/{six.slug}/api/next/").json()
    assert body["status"] == "wait" and "completion" not in body
    assert body["frees_at"] is not None
    Assignment.objects.filter(pk__in=[a.pk for a in held]).update(
        status=Assignment.Status.SUBMITTED
    )
    body = client.post(f"/work/{six.slug}/api/next/").json()
    assert body["status"] == "done" and body["completion"]["code"] == "FULLCODE"


def test_a_finish_claimed_as_out_of_work_is_partial_while_others_hold_pairs(six: Study) -> None:
    worker = make_worker(six, "direct")
    claimed = assignment_claim(worker=worker)
    assert claimed.assignment is not None
    submit(claimed.assignment)
    hold_remaining(six)
    worker_finish(worker=worker, out_of_work=True)
    assert worker.finished_full is False
    assert worker_completion_code(worker=worker) == "PARTCODE"


def test_a_blocked_worker_gets_the_screened_out_code_and_the_link_back(
    client: Client, study: Study
) -> None:
    Study.objects.filter(pk=study.pk).update(screened_out_code="SCREENED")
    make_pairs(study, 5)
    worker = enter_and_consent(client, study, "PID1")
    judge(client, study, 1)
    Worker.objects.filter(pk=worker.pk).update(state=Worker.State.BLOCKED)
    for url in (f"/work/{study.slug}/", f"/work/{study.slug}/done/"):
        response = client.get(url)
        assert response.status_code == 403
        assert b"SCREENED" in response.content
        assert b"https://app.prolific.com/submissions/complete?cc=SCREENED" in response.content
        assert b"FULLCODE" not in response.content and b"PARTCODE" not in response.content
    body = client.post(f"/work/{study.slug}/api/next/").json()
    assert body["error"] == "worker_blocked"
    assert body["completion"] == {
        "code": "SCREENED",
        "screened_out": True,
        "url": "https://app.prolific.com/submissions/complete?cc=SCREENED",
    }


def test_the_screened_out_code_must_differ_from_the_others(study: Study) -> None:
    with pytest.raises(ValidationError) as caught:
        study_settings_update(study=study, values={"screened_out_code": "PARTCODE"})
    assert "screened_out_code" in caught.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(screened_out_code="FULLCODE")
