"""The Prolific study from Concord: create it as a draft (never twice), publish, pause, resume
and stop it, against the local fake of Prolific's API over real HTTP (fake_prolific.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotation.models import Study
from annotation.roles import Role
from annotation.services.entry import entry_link_signature
from annotation.services.prolific import prolific_token_set
from tests.annotation.fake_prolific import TOKEN, FakeProlific, Fault
from tests.annotation.work_helpers import make_pairs
from tests.conftest import Cast, make_user

ENTRY = (
    "http://testserver/work/main-study/enter/prolific/"
    "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)
DRAFT = {
    "name": "Which answer is better?",
    "description": "Read two answers to a question and say which is better.",
    "places": "4",
}


@pytest.fixture
def fake(settings) -> Iterator[FakeProlific]:
    server = FakeProlific().start()
    settings.PROLIFIC_API_BASE = server.base_url
    settings.PROLIFIC_API_TIMEOUT_SECONDS = 1.0
    yield server
    server.stop()


@pytest.fixture
def study(cast: Cast, fake: FakeProlific) -> Study:
    """A live study with a token and its three codes, not linked to any Prolific study yet."""
    Study.objects.filter(pk=cast.study.pk).update(
        completion_code="FULLCODE",
        partial_completion_code="PARTCODE",
        screened_out_code="SCREENED",
        target_per_worker=10,
        pay_per_judgment_cents=15,
        expected_seconds_per_judgment=45,
        overlap=3,
    )
    cast.study.refresh_from_db()
    prolific_token_set(study=cast.study, token=TOKEN)
    make_pairs(cast.study, 6)
    return cast.study


@pytest.fixture
def researcher(client: Client, cast: Cast) -> Client:
    client.force_login(cast.researcher)
    return client


def create(client: Client, study: Study, **fields: str) -> tuple[int, str]:
    response = client.post(
        f"/studies/{study.slug}/prolific/draft/", {**DRAFT, **fields}, follow=True
    )
    return response.status_code, response.content.decode()


def move(client: Client, study: Study, action: str) -> str:
    response = client.post(
        f"/studies/{study.slug}/prolific/transition/", {"action": action}, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def creates(fake: FakeProlific) -> list:
    return [r for r in fake.calls("POST", "/api/v1/studies/") if r.path == "/api/v1/studies/"]


def drafts(fake: FakeProlific) -> list[dict]:
    return [s for s in fake.studies.values() if s["internal_name"].startswith("concord:")]


# --- Create ------------------------------------------------------------------------------------


def test_the_panel_shows_what_the_draft_will_carry_before_anything_is_sent(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    page = researcher.get(f"/studies/{study.slug}/prolific/").content.decode()
    assert 'id="prolific-draft-create"' in page
    assert "150¢ per submission" in page and "8 minutes" in page
    assert "FULLCODE</span> (COMPLETED): MANUALLY_REVIEW" in page
    assert "PARTCODE</span> (OTHER): MANUALLY_REVIEW" in page
    assert "SCREENED</span> (FAILED_ATTENTION_CHECK): MANUALLY_REVIEW" in page
    assert 'value="2"' in page  # places: 6 pairs x overlap 3 / target 10, rounded up
    assert fake.requests == []


def test_create_sends_every_documented_field_and_links_the_draft(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    status, page = create(researcher, study)
    assert status == 200, page
    (call,) = creates(fake)
    body = call.body
    assert call.authorization == f"Token {TOKEN}"
    assert body["name"] == "Which answer is better?"
    assert body["description"] == "Read two answers to a question and say which is better."
    study.refresh_from_db()
    assert body["internal_name"] == f"concord:main-study:{study.prolific_draft_key}"
    assert len(study.prolific_draft_key) == 12
    assert body["external_study_url"] == ENTRY
    assert body["prolific_id_option"] == "url_parameters"
    assert body["completion_codes"] == [
        {"code": "FULLCODE", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]},
        {"code": "PARTCODE", "code_type": "OTHER", "actions": [{"action": "MANUALLY_REVIEW"}]},
        {
            "code": "SCREENED",
            "code_type": "FAILED_ATTENTION_CHECK",
            "actions": [{"action": "MANUALLY_REVIEW"}],
        },
    ]
    assert body["total_available_places"] == 4
    assert body["estimated_completion_time"] == 8  # 10 x 45 s = 7.5 minutes, rounded up
    assert body["reward"] == 150  # cents: 10 judgments x 15
    assert set(body) == {
        "name",
        "internal_name",
        "description",
        "external_study_url",
        "prolific_id_option",
        "completion_codes",
        "total_available_places",
        "estimated_completion_time",
        "reward",
    }
    # The look-up by internal name came first; the draft Prolific made is the linked study.
    assert [r.method for r in fake.calls(path="/api/v1/studies/")] == ["GET", "POST"]
    (draft,) = drafts(fake)
    assert study.prolific_study_id == draft["id"]
    assert study.prolific_study_status == "UNPUBLISHED"
    assert study.prolific_places == 4 and study.prolific_reward_cents == 150
    assert f"Draft created on Prolific and linked: study {draft['id']}" in page
    assert 'id="prolific-publish"' in page and 'id="prolific-draft-create"' not in page


def test_the_full_code_approves_automatically_when_the_study_says_so(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_auto_approve=True, screened_out_code="")
    create(researcher, study)
    (call,) = creates(fake)
    assert call.body["completion_codes"] == [
        {
            "code": "FULLCODE",
            "code_type": "COMPLETED",
            "actions": [{"action": "AUTOMATICALLY_APPROVE"}],
        },
        {"code": "PARTCODE", "code_type": "OTHER", "actions": [{"action": "MANUALLY_REVIEW"}]},
    ]


def test_a_linked_study_is_not_created_twice(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    create(researcher, study)
    linked = Study.objects.get(pk=study.pk).prolific_study_id
    status, page = create(researcher, study)
    assert status == 400
    assert f"already linked to Prolific study {linked}: no second draft is made" in page
    assert len(creates(fake)) == 1 and len(drafts(fake)) == 1


def test_a_click_retried_after_a_timeout_finds_the_draft_instead_of_making_a_second(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    # Prolific makes the draft, but only after Concord's deadline (1 s) has passed.
    fake.inject(Fault(kind="timeout", path="/api/v1/studies/", method="POST", seconds=1.5))
    status, page = create(researcher, study)
    assert status == 400 and "Prolific did not answer in time" in page
    study.refresh_from_db()
    assert study.prolific_study_id == "" and study.prolific_draft_key
    deadline = time.monotonic() + 5
    while not drafts(fake) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(drafts(fake)) == 1
    # An impatient second click while the attempt's lease holds makes no call at all.
    before = len(fake.requests)
    status, page = create(researcher, study)
    assert status == 400 and "A draft is being created on Prolific for this study" in page
    assert len(fake.requests) == before
    # Later (the lease ran out), the retry looks the draft up by its name and links it.
    Study.objects.filter(pk=study.pk).update(
        prolific_draft_lease_until=timezone.now() - timedelta(seconds=1)
    )
    status, page = create(researcher, study)
    assert status == 200 and "Draft found on Prolific and linked" in page
    assert len(creates(fake)) == 1
    (draft,) = drafts(fake)
    study.refresh_from_db()
    assert study.prolific_study_id == draft["id"]
    assert draft["internal_name"] == f"concord:main-study:{study.prolific_draft_key}"


def test_a_refusal_shows_prolifics_status_and_words_and_can_be_retried_at_once(
    researcher: Client, study: Study, fake: FakeProlific, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.inject(Fault(kind="400", path="/api/v1/studies/", method="POST"))
    status, page = create(researcher, study)
    assert status == 400
    assert "Prolific refused the request (400): Something went wrong." in page
    assert drafts(fake) == []
    status, page = create(researcher, study)  # nothing was made: no lease to wait for
    assert status == 200 and "Draft created on Prolific" in page
    assert len(drafts(fake)) == 1
    assert TOKEN not in caplog.text and TOKEN not in page


def test_a_server_error_is_shown_with_its_status_and_keeps_the_lease(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    fake.inject(Fault(kind="503", path="/api/v1/studies/", method="POST"))
    status, page = create(researcher, study)
    assert status == 400
    assert "Prolific answered 503; try again later. Prolific said: Something went wrong." in page
    study.refresh_from_db()
    assert study.prolific_draft_lease_until and study.prolific_draft_lease_until > timezone.now()


def test_nothing_is_sent_without_a_completion_code(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(
        completion_code="", partial_completion_code="", screened_out_code=""
    )
    status, page = create(researcher, study)
    assert status == 400 and "set the completion code in Settings first" in page
    assert fake.requests == []


def test_a_signed_entry_link_is_given_to_prolific_for_the_new_id(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(entry_link_required=True)
    create(researcher, study)
    study.refresh_from_db()
    (draft,) = drafts(fake)
    (patch,) = fake.calls("PATCH", f"/api/v1/studies/{draft['id']}/")
    signed = f"{ENTRY}&sig={entry_link_signature(study=study)}"
    assert patch.body == {"external_study_url": signed}
    assert draft["external_study_url"] == signed


# --- Transitions -------------------------------------------------------------------------------


def buttons(page: str) -> set[str]:
    return {a for a in ("publish", "pause", "start", "stop") if f'id="prolific-{a}"' in page}


def test_publish_pause_resume_and_stop_offer_only_what_each_status_allows(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    page = create(researcher, study)[1]
    (draft,) = drafts(fake)
    assert buttons(page) == {"publish"}
    for action, status, offered in (
        ("PUBLISH", "ACTIVE", {"pause", "stop"}),
        ("PAUSE", "PAUSED", {"start", "stop"}),
        ("START", "ACTIVE", {"pause", "stop"}),
        ("STOP", "AWAITING REVIEW", set()),
    ):
        page = move(researcher, study, action)
        assert fake.calls("POST", f"/api/v1/studies/{draft['id']}/transition/")[-1].body == {
            "action": action
        }
        assert fake.studies[draft["id"]]["status"] == status
        assert Study.objects.get(pk=study.pk).prolific_study_status == status
        assert f'id="prolific-status">{status}<' in page
        assert buttons(page) == offered, action
    assert "No transition is possible from AWAITING REVIEW" in page


def test_a_transition_not_allowed_from_the_status_is_refused_without_a_call(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    create(researcher, study)
    before = len(fake.requests)
    page = move(researcher, study, "PAUSE")
    assert "Prolific&#x27;s study is UNPUBLISHED: pause on prolific is not possible" in page
    page = move(researcher, study, "DELETE")
    assert "Unknown transition" in page
    assert len(fake.requests) == before


def test_publishing_waits_for_the_concord_study_to_be_live(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    create(researcher, study)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.DRAFT)
    before = len(fake.requests)
    page = move(researcher, study, "PUBLISH")
    assert "Launch the study in Concord first" in page
    assert len(fake.requests) == before


def test_a_study_changed_on_prolifics_site_is_refused_clearly_and_read_again(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    create(researcher, study)
    move(researcher, study, "PUBLISH")
    (draft,) = drafts(fake)
    fake.studies[draft["id"]]["status"] = "PAUSED"  # paused on Prolific's own pages
    page = move(researcher, study, "PAUSE")
    assert "Not done: Prolific refused the request (400): Cannot PAUSE a study in PAUSED" in page
    assert Study.objects.get(pk=study.pk).prolific_study_status == "PAUSED"
    assert buttons(page) == {"start", "stop"}


def test_a_transition_that_times_out_says_so_and_changes_nothing_here(
    researcher: Client, study: Study, fake: FakeProlific, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    create(researcher, study)
    fake.inject(Fault(kind="500", path="/api/v1/studies/", method="POST"))
    page = move(researcher, study, "PUBLISH")
    assert "Not done: Prolific answered 500; try again later." in page
    assert Study.objects.get(pk=study.pk).prolific_study_status == "UNPUBLISHED"
    assert TOKEN not in caplog.text


# --- Access and the checklist ------------------------------------------------------------------


def test_only_the_studys_researchers_create_or_move_the_prolific_study(
    client: Client, cast: Cast, study: Study, fake: FakeProlific
) -> None:
    stranger = make_user("remy-researcher", Role.RESEARCHER)  # a researcher, not of this study
    annotator = cast.worker_one.user
    assert annotator is not None
    for user in (cast.outsider, stranger, annotator):
        client.force_login(user)
        assert client.get(f"/studies/{study.slug}/prolific/").status_code == 404, user
        assert client.post(f"/studies/{study.slug}/prolific/draft/", DRAFT).status_code == 404
        response = client.post(f"/studies/{study.slug}/prolific/transition/", {"action": "STOP"})
        assert response.status_code == 404
    client.logout()
    response = client.post(f"/studies/{study.slug}/prolific/draft/", DRAFT)
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert fake.requests == []
    client.force_login(cast.researcher)
    assert create(client, study)[0] == 200 and len(drafts(fake)) == 1


def test_the_checklist_says_whether_the_prolific_study_is_linked_a_draft_or_published(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    def item() -> str:
        page = researcher.get(f"/studies/{study.slug}/checklist/").content.decode()
        start = page.index("Prolific fields filled")
        return page[start : start + 600]

    assert "missing: Prolific study id" in item()
    Study.objects.filter(pk=study.pk).update(prolific_study_id="LINKED1")
    assert "study id LINKED1 (linked)" in item()
    Study.objects.filter(pk=study.pk).update(prolific_study_id="")
    create(researcher, study)
    assert "(draft on Prolific, not published" in item()
    move(researcher, study, "PUBLISH")
    assert "(published on Prolific: ACTIVE)" in item()
    move(researcher, study, "PAUSE")
    assert "(published on Prolific, paused)" in item()


def test_an_unreadable_token_is_said_and_takes_no_lease(
    researcher: Client, study: Study, fake: FakeProlific
) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_token_encrypted="not-a-fernet-token")
    status, page = create(researcher, study)
    assert status == 400 and "The stored Prolific token cannot be read" in page
    study.refresh_from_db()
    assert study.prolific_draft_lease_until is None and study.prolific_study_id == ""
    assert fake.requests == []
