"""The JSON API for custom front ends: same services, same rules as the pages."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.api import SubmitInputSerializer, submit_input_plain
from annotation.models import Assignment, HumanJudgment, Study, Worker
from tests.annotation.work_helpers import enter_and_consent, make_pairs
from tests.conftest import Cast


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def study(cast: Cast) -> Study:
    study = cast.study
    study.gold_share = Decimal(0)
    study.target_per_worker = 2
    study.completion_code = "API-CODE"
    study.form_values = True
    study.save()
    make_pairs(study, 3)
    return study


def api(study: Study, path: str) -> str:
    return f"/work/{study.slug}/api/{path}"


def next_item(client: Client, study: Study) -> dict:
    response = client.post(api(study, "next/"))
    assert response.status_code == 200, response.content
    return response.json()


def test_next_returns_an_item_with_opaque_id_texts_by_side_and_the_forms(
    client: Client, study: Study
) -> None:
    enter_and_consent(client, study, "PID1")
    body = next_item(client, study)
    assert body["status"] == "item"
    assert set(body["item"]) == {"id", "prompt", "left", "right", "winner_side", "expires_at"}
    assert body["item"]["prompt"][0]["html"].startswith("<p>Q")
    assert body["forms"]["likert"] and body["forms"]["values"]
    assert body["forms"]["values_required"] is True  # the rule the form enforces, said
    assert body["progress"] == {"done": 0, "target": 2}
    assignment = Assignment.objects.get(public_id=body["item"]["id"])
    assert assignment.worker.external_id == "PID1"
    # Asking again returns the same reservation.
    assert next_item(client, study)["item"]["id"] == body["item"]["id"]


def test_submit_is_idempotent_and_reports_progress(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    item = next_item(client, study)["item"]
    payload = {"submission_id": str(uuid.uuid4()), "likert": 6, "values": ["clarity"]}
    url = api(study, f"items/{item['id']}/submit/")
    first = client.post(url, payload, content_type="application/json")
    again = client.post(url, payload, content_type="application/json")
    assert first.status_code == again.status_code == 201
    assert first.json()["progress"] == {"done": 1, "target": 2}
    assert HumanJudgment.objects.count() == 1
    assert client.get(api(study, "progress/")).json() == {"done": 1, "target": 2}


def test_an_invalid_submission_names_the_field(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    item = next_item(client, study)["item"]
    response = client.post(
        api(study, f"items/{item['id']}/submit/"),
        {"submission_id": str(uuid.uuid4()), "likert": 2, "values": ["speed"]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid",
        "message": "Unknown value(s): speed.",
        "field": "values",
    }


def test_a_late_submission_is_a_conflict_and_is_not_saved(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    item = next_item(client, study)["item"]
    Assignment.objects.filter(public_id=item["id"]).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    response = client.post(
        api(study, f"items/{item['id']}/submit/"),
        {"submission_id": str(uuid.uuid4()), "likert": 2, "values": ["clarity"]},
        content_type="application/json",
    )
    assert response.status_code == 409 and response.json()["error"] == "expired"
    assert not HumanJudgment.objects.exists()


def test_another_workers_item_id_is_not_found(study: Study) -> None:
    mine, theirs = Client(), Client()
    enter_and_consent(mine, study, "PID1")
    enter_and_consent(theirs, study, "PID2")
    item = next_item(theirs, study)["item"]
    response = mine.post(
        api(study, f"items/{item['id']}/submit/"),
        {"submission_id": str(uuid.uuid4()), "likert": 2, "values": ["clarity"]},
        content_type="application/json",
    )
    assert response.status_code == 404
    assert not HumanJudgment.objects.exists()


def test_the_api_ends_with_the_completion_code_after_the_target(
    client: Client, study: Study
) -> None:
    enter_and_consent(client, study, "PID1")
    for _ in range(2):
        item = next_item(client, study)["item"]
        client.post(
            api(study, f"items/{item['id']}/submit/"),
            {"submission_id": str(uuid.uuid4()), "likert": 4},
            content_type="application/json",
        )
    body = next_item(client, study)
    assert body["status"] == "done" and body["item"] is None
    assert body["completion"]["code"] == "API-CODE"


def test_a_blocked_worker_gets_a_forbidden_answer(client: Client, study: Study) -> None:
    worker = enter_and_consent(client, study, "PID1")
    Worker.objects.filter(pk=worker.pk).update(state=Worker.State.BLOCKED)
    response = client.post(api(study, "next/"))
    assert response.status_code == 403 and response.json()["error"] == "worker_blocked"


def test_the_api_needs_the_session_bound_by_the_panel_link(
    client: Client, study: Study, cast: Cast
) -> None:
    assert cast.worker_one.user is not None
    client.force_login(cast.worker_one.user)
    response = client.post(api(study, "next/"))
    assert response.status_code == 403
    assert not Assignment.objects.exists()


def test_an_expired_session_or_a_deactivated_user_gets_nothing(
    client: Client, study: Study
) -> None:
    worker = enter_and_consent(client, study, "PID1")
    assert next_item(client, study)["status"] == "item"
    assert worker.user is not None
    User.objects.filter(pk=worker.user.pk).update(is_active=False)
    assert client.post(api(study, "next/")).status_code == 403
    User.objects.filter(pk=worker.user.pk).update(is_active=True)
    assert client.post(api(study, "next/")).status_code == 200
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    assert client.post(api(study, "next/")).status_code == 403


SUBMISSION = str(uuid.uuid4())


@pytest.mark.parametrize(
    "data",
    [
        {"submission_id": SUBMISSION, "likert": 3},
        {"submission_id": SUBMISSION.upper(), "likert": None, "values": [" clarity "]},
        {"submission_id": SUBMISSION.replace("-", ""), "reason": "  why \n", "comment": " c "},
        {"submission_id": SUBMISSION, "acceptability_left": " accept", "axes_left": {"x": " y"}},
        {"submission_id": SUBMISSION, "likert": 8, "unknown": "ignored"},
        # Everything below goes to the serializer: it converts or refuses these.
        {"submission_id": SUBMISSION, "likert": "3"},
        {"submission_id": SUBMISSION, "likert": 3.0},
        {"submission_id": SUBMISSION, "likert": True},
        {"submission_id": SUBMISSION, "values": [""]},
        {"submission_id": SUBMISSION, "values": None},
        {"submission_id": SUBMISSION, "reason": "nul \x00"},
        {"submission_id": SUBMISSION, "reason": 5},
        {"submission_id": SUBMISSION, "axes_right": None},
        {"submission_id": SUBMISSION, "axes_right": {"relevance": " "}},
        {"submission_id": "not-a-uuid"},
        {"likert": 3},
        [1, 2],
    ],
)
def test_a_submit_is_read_as_its_serializer_reads_it(data: object) -> None:
    plain = submit_input_plain(data)
    serializer = SubmitInputSerializer(data=data)
    if plain is None:
        return  # the API asks the serializer itself
    assert serializer.is_valid(), serializer.errors
    assert plain == dict(serializer.validated_data)


def test_next_reads_the_item_without_the_study_it_read_with_the_worker(
    cast: Cast, client: Client
) -> None:
    make_pairs(cast.study, 2)
    worker = enter_and_consent(client, cast.study, "pid-item-study")
    with CaptureQueriesContext(connection) as queries:
        response = client.post(f"/work/{cast.study.slug}/api/next/")
    assert response.status_code == 200 and response.json()["status"] == "item"
    # The study is read once, with the worker; the item's read joins no study.
    study_reads = [q["sql"] for q in queries if '"annotation_study"' in q["sql"]]
    assert len(study_reads) == 1 and '"annotation_worker"' in study_reads[0], study_reads
    assert worker.study_id == cast.study.pk
