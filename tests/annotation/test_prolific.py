"""Concord connected to Prolific: the token, the linked study, verified entry, against a local
fake of Prolific's API speaking its documented endpoints over real HTTP (fake_prolific.py)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client

from annotation.models import Assignment, HumanJudgment, Study, Worker
from annotation.services.prolific import (
    prolific_connection_test,
    prolific_connection_test_run,
    prolific_token_set,
    unverified_recheck,
)
from core.broker import queue_length
from core.queues import Queue
from tests.annotation.fake_prolific import TOKEN, FakeProlific, Fault
from tests.annotation.work_helpers import make_pairs
from tests.conftest import Cast
from tests.judges.integration import broker_purge

PROLIFIC_STUDY = "STUDY1"


@pytest.fixture
def fake(settings) -> Iterator[FakeProlific]:
    server = FakeProlific().start()
    settings.PROLIFIC_API_BASE = server.base_url
    settings.PROLIFIC_API_TIMEOUT_SECONDS = 1.0
    server.study_add(study_id=PROLIFIC_STUDY, name="Chatbot answers", places=5)
    cache.clear()
    yield server
    server.stop()


@pytest.fixture
def study(cast: Cast, fake: FakeProlific) -> Study:
    study = cast.study
    Study.objects.filter(pk=study.pk).update(
        prolific_study_id=PROLIFIC_STUDY,
        gold_share=Decimal(0),
        target_per_worker=3,
        completion_code="FULLCODE",
    )
    study.refresh_from_db()
    prolific_token_set(study=study, token=TOKEN)
    make_pairs(study, 6)
    return study


def enter(client: Client, study: Study, pid: str, session: str) -> Any:
    return client.get(
        f"/work/{study.slug}/enter/prolific/"
        f"?PROLIFIC_PID={pid}&STUDY_ID={PROLIFIC_STUDY}&SESSION_ID={session}"
    )


def lookups(fake: FakeProlific) -> int:
    return len(fake.calls("GET", "/api/v1/submissions/"))


# --- The connection ----------------------------------------------------------------------------


def _test_answer(client: Client, response: Any) -> dict[str, Any]:
    """Run the pending test as the worker does; the panel's status JSON for the click."""
    test_id = response["Location"].split("?test=")[1]
    study = Study.objects.get(slug=response["Location"].split("/")[2])
    assert prolific_connection_test_run(study_id=study.pk)
    status = client.get(f"/studies/{study.slug}/prolific/test/{test_id}.json").json()
    assert status["state"] == "done"
    return status


def test_test_connection_reads_the_study_and_keeps_its_places(
    client: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    client.force_login(cast.researcher)
    response = client.post(
        f"/studies/{study.slug}/prolific/", {"action": "test", "prolific_study_id": ""}
    )
    assert response.status_code == 302
    assert not fake.calls("GET", f"/api/v1/studies/{PROLIFIC_STUDY}/")  # not in the request
    pending = client.get(response["Location"]).content
    assert b'data-state="pending"' in pending and b"connection_test.js" in pending
    status = _test_answer(client, response)
    assert status["ok"] is True
    assert "Connected to Prolific" in status["message"] and "5 places" in status["message"]
    assert b"Connected to Prolific" in client.get(response["Location"]).content
    study.refresh_from_db()
    assert study.prolific_places == 5
    (call,) = fake.calls("GET", f"/api/v1/studies/{PROLIFIC_STUDY}/")
    assert call.authorization == f"Token {TOKEN}"


def test_twelve_test_clicks_at_a_slow_prolific_queue_one_test(
    client: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    fake.inject(
        Fault(kind="timeout", path=f"/api/v1/studies/{PROLIFIC_STUDY}/", seconds=3.0, times=5)
    )
    client.force_login(cast.researcher)
    form = {"action": "test", "prolific_study_id": ""}
    responses = [client.post(f"/studies/{study.slug}/prolific/", form) for _ in range(12)]
    assert {response["Location"] for response in responses} == {responses[0]["Location"]}
    assert queue_length(Queue.DEFAULT) == 1 and not fake.calls("GET", "/api/v1/studies/")
    status = _test_answer(client, responses[0])  # the timeout, met by the worker
    assert status["ok"] is False
    assert (
        client.post(f"/studies/{study.slug}/prolific/", form)["Location"]
        != (responses[0]["Location"])
    )
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)


def test_a_wrong_token_gets_a_clear_error_and_is_never_shown(
    client: Client, cast: Cast, study: Study, fake: FakeProlific, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    client.force_login(cast.researcher)
    wrong = "not-the-token-" + uuid.uuid4().hex
    response = client.post(
        f"/studies/{study.slug}/prolific/",
        {"action": "test", "token": wrong, "prolific_study_id": ""},
    )
    status = _test_answer(client, response)
    assert status["ok"] is False
    assert "Prolific refused the API token (401)" in status["message"]
    assert wrong not in status["message"]
    study.refresh_from_db()
    assert wrong not in study.prolific_token_encrypted and study.prolific_token_encrypted
    page = client.get(response["Location"]).content
    assert b"Prolific refused the API token (401)" in page
    assert wrong.encode() not in page and TOKEN.encode() not in page
    assert b"stored encrypted" in page
    assert wrong not in caplog.text and TOKEN not in caplog.text
    # Another study's researcher reads nothing of this study's tests.
    client.force_login(cast.outsider)
    test_id = response["Location"].split("?test=")[1]
    assert client.get(f"/studies/{study.slug}/prolific/test/{test_id}.json").status_code == 404


def test_linking_needs_a_study_the_token_can_see(
    client: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_study_id="")
    fake.study_add(study_id="OTHER2", places=3)
    client.force_login(cast.researcher)
    response = client.post(
        f"/studies/{study.slug}/prolific/", {"action": "save", "prolific_study_id": "NOPE"}
    )
    assert response.status_code == 400 and b"no study" in response.content
    study.refresh_from_db()
    assert study.prolific_study_id == ""
    client.post(
        f"/studies/{study.slug}/prolific/", {"action": "save", "prolific_study_id": "OTHER2"}
    )
    study.refresh_from_db()
    assert study.prolific_study_id == "OTHER2" and study.prolific_places == 3


def test_only_the_studys_researchers_reach_the_connection_page(
    client: Client, cast: Cast, study: Study
) -> None:
    client.force_login(cast.outsider)
    assert client.get(f"/studies/{study.slug}/prolific/").status_code in (403, 404)
    client.force_login(cast.researcher)
    assert client.get(f"/studies/{study.slug}/prolific/").status_code == 200


def test_the_checklist_says_plainly_that_participants_are_unverified_without_a_token(
    client: Client, cast: Cast, study: Study
) -> None:
    client.force_login(cast.researcher)
    Study.objects.filter(pk=study.pk).update(prolific_token_encrypted="")
    page = client.get(f"/studies/{study.slug}/checklist/").content.decode()
    assert "participants are unverified" in page and "make up participants" in page
    prolific_token_set(study=study, token=TOKEN)
    page = client.get(f"/studies/{study.slug}/checklist/").content.decode()
    assert "checked with Prolific" in page


# --- Verified entry ----------------------------------------------------------------------------


def test_a_real_participant_enters_and_a_fabricated_one_learns_nothing(
    study: Study, fake: FakeProlific
) -> None:
    real = fake.submission_add(study_id=PROLIFIC_STUDY)
    response = enter(Client(), study, real["participant_id"], real["id"])
    assert response.status_code == 302
    worker = Worker.objects.get(external_id=real["participant_id"])
    assert worker.prolific_verification == Worker.Verification.VERIFIED
    made_up = enter(Client(), study, "FAKEPID1", "FAKESESSION1")
    assert made_up.status_code == 403
    body = made_up.content.decode()
    assert "could not confirm" in body
    assert study.name not in body and "Chatbot" not in body
    assert not Worker.objects.filter(external_id="FAKEPID1").exists()


def test_replayed_links_with_new_pids_do_not_enter(study: Study, fake: FakeProlific) -> None:
    real = fake.submission_add(study_id=PROLIFIC_STUDY)
    for i in range(5):
        assert enter(Client(), study, f"MADEUP{i}", real["id"]).status_code == 403
    assert Worker.objects.filter(study=study, external_id__startswith="MADEUP").count() == 0


def test_a_made_up_session_cannot_lock_out_the_real_participant(
    study: Study, fake: FakeProlific
) -> None:
    real = fake.submission_add(study_id=PROLIFIC_STUDY)
    attacker = enter(Client(), study, real["participant_id"], "MADEUPSESSION")
    assert attacker.status_code == 403
    assert not Worker.objects.filter(external_id=real["participant_id"]).exists()
    assert enter(Client(), study, real["participant_id"], real["id"]).status_code == 302


def test_a_submission_of_another_study_or_no_longer_active_is_refused(
    study: Study, fake: FakeProlific
) -> None:
    fake.study_add(study_id="ELSEWHERE")
    other = fake.submission_add(study_id="ELSEWHERE")
    assert enter(Client(), study, other["participant_id"], other["id"]).status_code == 403
    gone = fake.submission_add(study_id=PROLIFIC_STUDY, status="RETURNED")
    assert enter(Client(), study, gone["participant_id"], gone["id"]).status_code == 403


def test_one_lookup_per_participant_and_none_on_the_item_path(
    study: Study, fake: FakeProlific
) -> None:
    real = fake.submission_add(study_id=PROLIFIC_STUDY)
    client = Client()
    enter(client, study, real["participant_id"], real["id"])
    client.post(f"/work/{study.slug}/consent/", {"agree": "yes"})
    assert lookups(fake) == 1
    for _ in range(2):
        location = client.get(f"/work/{study.slug}/")["Location"]
        public_id = location.rstrip("/").rsplit("/", 1)[-1]
        client.post(
            f"/work/{study.slug}/item/{public_id}/",
            {"submission_id": str(uuid.uuid4()), "likert": "2"},
        )
    assert HumanJudgment.objects.filter(worker__external_id=real["participant_id"]).count() == 2
    enter(Client(), study, real["participant_id"], real["id"])  # back after losing the browser
    assert lookups(fake) == 1
    # A refused SESSION_ID is remembered: a flood of the same made-up link asks Prolific once.
    for _ in range(3):
        enter(Client(), study, "FLOOD", "FLOODSESSION")
    assert lookups(fake) == 2


def test_an_outage_lets_in_a_bounded_number_marked_then_checks_them(
    study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_unverified_max=2)
    study.refresh_from_db()
    real = fake.submission_add(study_id=PROLIFIC_STUDY)
    fake.inject(Fault(kind="503", path="/api/v1/submissions/", times=2))
    fake.inject(Fault(kind="timeout", path="/api/v1/submissions/", times=1, seconds=1.5))
    assert enter(Client(), study, real["participant_id"], real["id"]).status_code == 302
    assert enter(Client(), study, "FABRICATED", "FABSESSION").status_code == 302
    third = enter(Client(), study, "ANOTHER", "ANOTHERSESSION")
    assert third.status_code == 403 and b"try again in a few minutes" in third.content
    marked = Worker.objects.filter(study=study, prolific_verification="unverified")
    assert marked.count() == 2
    # Prolific answers again: the real one is verified, the made-up one excluded from pay.
    assert unverified_recheck(study=study) == (1, 1)
    fabricated = Worker.objects.get(external_id="FABRICATED")
    assert fabricated.excluded and fabricated.state == Worker.State.BLOCKED
    assert Worker.objects.get(external_id=real["participant_id"]).prolific_verification == (
        Worker.Verification.VERIFIED
    )


def test_a_verified_entry_takes_back_a_pid_bound_during_an_outage(
    study: Study, fake: FakeProlific
) -> None:
    real = fake.submission_add(study_id=PROLIFIC_STUDY)
    fake.inject(Fault(kind="500", path="/api/v1/submissions/", times=1))
    assert enter(Client(), study, real["participant_id"], "STOLENSESSION").status_code == 302
    assert enter(Client(), study, real["participant_id"], real["id"]).status_code == 302
    worker = Worker.objects.get(external_id=real["participant_id"])
    assert worker.panel_session_id == real["id"]
    assert worker.prolific_verification == Worker.Verification.VERIFIED


def test_entries_are_capped_by_the_studys_places(study: Study, fake: FakeProlific) -> None:
    prolific_connection_test(study=study)
    already = Worker.objects.filter(study=study, panel=Worker.Panel.PROLIFIC).count()  # the cast's
    Study.objects.filter(pk=study.pk).update(prolific_places=already + 2)
    subs = [fake.submission_add(study_id=PROLIFIC_STUDY) for _ in range(3)]
    first = Client()
    assert enter(first, study, subs[0]["participant_id"], subs[0]["id"]).status_code == 302
    assert enter(Client(), study, subs[1]["participant_id"], subs[1]["id"]).status_code == 302
    full = enter(Client(), study, subs[2]["participant_id"], subs[2]["id"])
    assert full.status_code == 403 and b"full" in full.content
    # Someone already in comes back in.
    assert enter(first, study, subs[0]["participant_id"], subs[0]["id"]).status_code == 302


def test_without_a_token_entry_works_as_before_and_asks_nobody(
    cast: Cast, fake: FakeProlific
) -> None:
    study = cast.study
    Study.objects.filter(pk=study.pk).update(prolific_study_id=PROLIFIC_STUDY)
    make_pairs(study, 2)
    assert enter(Client(), study, "ANYONE", "ANYSESSION").status_code == 302
    assert fake.calls() == []
    assert not Assignment.objects.exists()
