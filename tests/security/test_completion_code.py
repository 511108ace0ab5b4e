"""The full completion code only at the target or when out of work; stopping early is partial."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from django.test import Client

from annotation.models import Assignment, Study
from tests.annotation.work_helpers import enter_and_consent, make_pairs
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
