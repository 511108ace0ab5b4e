"""The annotator's pages over HTTP: entry, sessions, consent, the form, completion."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from annotation.models import Assignment, HumanJudgment, Study, Worker
from annotation.panels import invite_token_make
from tests.annotation.work_helpers import enter_and_consent, make_pairs, open_item, prolific_url
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
    study.completion_code = "C0DE42"
    study.instructions = "Read **both** answers."
    study.save()
    make_pairs(study, 4)
    return study


def test_a_prolific_participant_enters_consents_and_reaches_an_item(
    client: Client, study: Study
) -> None:
    response = client.get(prolific_url(study, "PID1"))
    assert response.status_code == 302
    assert response["Location"] == f"/work/{study.slug}/consent/"
    consent = client.get(response["Location"])
    assert b"<strong>both</strong>" in consent.content
    assert "script-src 'self'" in consent["Content-Security-Policy"]
    assert client.post(f"/work/{study.slug}/consent/", {"agree": "yes"}).status_code == 302
    assignment = open_item(client, study)
    page = client.get(f"/work/{study.slug}/item/{assignment.public_id}/")
    assert page.status_code == 200
    assert page["Content-Security-Policy"].startswith("default-src 'self'")
    assert "no-store" in page["Cache-Control"]
    worker = Worker.objects.get(external_id="PID1")
    assert worker.panel_session_id == "S1" and worker.consented_at is not None


def test_work_waits_for_consent(client: Client, study: Study) -> None:
    client.get(prolific_url(study, "PID1"))
    response = client.get(f"/work/{study.slug}/")
    assert response["Location"] == f"/work/{study.slug}/consent/"
    refused = client.post(f"/work/{study.slug}/consent/", {})
    assert refused.status_code == 400 and b"tick the box" in refused.content


def test_a_prolific_link_without_a_participant_id_is_refused_by_name(
    client: Client, study: Study
) -> None:
    response = client.get(f"/work/{study.slug}/enter/prolific/?STUDY_ID=S&SESSION_ID=X")
    assert response.status_code == 403
    assert b"PROLIFIC_PID" in response.content
    assert (
        not Worker.objects.filter(panel="prolific", study=study)
        .exclude(external_id__startswith="PID-")
        .exists()
    )


def test_a_second_concurrent_session_for_the_same_participant_is_refused(
    study: Study,
) -> None:
    first, second = Client(), Client()
    enter_and_consent(first, study, "PID1")
    response = second.get(prolific_url(study, "PID1"))
    assert response.status_code == 403
    assert b"another window or device" in response.content
    # The first browser keeps working; the same browser may come back through its link.
    assert first.get(f"/work/{study.slug}/").status_code == 302
    assert first.get(prolific_url(study, "PID1")).status_code == 302


def test_a_session_idle_past_the_limit_can_be_taken_over_and_the_old_one_is_out(
    study: Study,
) -> None:
    first, second = Client(), Client()
    enter_and_consent(first, study, "PID1")
    Worker.objects.filter(external_id="PID1").update(
        last_seen_at=timezone.now() - timedelta(hours=1)
    )
    assert second.get(prolific_url(study, "PID1")).status_code == 302
    response = first.get(f"/work/{study.slug}/")
    assert response.status_code == 403 and b"another window" in response.content


def test_an_invite_link_admits_one_person_only(study: Study) -> None:
    token = invite_token_make(study=study)
    url = f"/work/{study.slug}/enter/invite/?token={token}"
    first, second = Client(), Client()
    assert first.get(url).status_code == 302
    response = second.get(url)
    assert response.status_code == 403 and b"already used" in response.content


def test_a_tampered_or_foreign_invite_is_refused(client: Client, study: Study, cast: Cast) -> None:
    token = invite_token_make(study=study)
    bad = client.get(f"/work/{study.slug}/enter/invite/?token={token[:-2]}xx")
    assert bad.status_code == 403 and b"not valid" in bad.content
    cast.other_study.status = Study.Status.LIVE
    cast.other_study.save()
    foreign = client.get(f"/work/{cast.other_study.slug}/enter/invite/?token={token}")
    assert foreign.status_code == 403 and b"another study" in foreign.content


def test_entry_is_rate_limited_per_client(client: Client, study: Study, settings) -> None:
    settings.CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE = 3
    statuses = [client.get(prolific_url(study, f"PID{i}")).status_code for i in range(4)]
    assert statuses == [302, 302, 302, 429]


def test_a_burst_across_the_turn_of_a_minute_is_still_limited(
    client: Client, study: Study, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three entries at 59.9 s of one minute and a fourth at 0.1 s of the next are four in 0.2 s:
    # the sliding window refuses the fourth (a fixed window let it through, and CI met it).
    settings.CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE = 3
    start = timezone.now().replace(second=59, microsecond=900_000)
    clock = iter([start] * 3 + [start + timedelta(seconds=0.2)])
    statuses = []
    for i in range(4):
        moment = next(clock)
        monkeypatch.setattr(timezone, "now", lambda moment=moment: moment)
        statuses.append(client.get(prolific_url(study, f"PID{i}")).status_code)
    assert statuses == [302, 302, 302, 429]


def test_the_entry_limit_frees_up_as_the_minute_passes(
    client: Client, study: Study, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three entries at the start of one minute have all but left the window 59 s into the next.
    settings.CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE = 3
    start = timezone.now().replace(second=0, microsecond=0)
    moments = [start] * 3 + [start + timedelta(seconds=60 + 59)]
    statuses = []
    for i, moment in enumerate(moments):
        monkeypatch.setattr(timezone, "now", lambda moment=moment: moment)
        statuses.append(client.get(prolific_url(study, f"PID{i}")).status_code)
    assert statuses == [302, 302, 302, 302]


def test_submitting_the_form_saves_once_and_moves_on(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    url = f"/work/{study.slug}/item/{assignment.public_id}/"
    form = {"submission_id": str(uuid.uuid4()), "likert": "2", "comment": "fine"}
    first = client.post(url, form)
    again = client.post(url, form)  # double click / back button and resubmit
    assert first.status_code == again.status_code == 302
    judgment = HumanJudgment.objects.get(assignment=assignment)
    assert judgment.likert_shown == 2 and judgment.comment == "fine"
    # The old item page now sends the worker on to the next item.
    assert client.get(url)["Location"] == f"/work/{study.slug}/"


def test_an_invalid_form_is_shown_again_with_the_error(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    response = client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "9"},
    )
    assert response.status_code == 400
    assert b"from 1 to 8, not 9" in response.content
    assert not HumanJudgment.objects.exists()


def test_a_late_answer_is_refused_with_a_message_and_the_worker_moves_on(
    client: Client, study: Study
) -> None:
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    Assignment.objects.filter(pk=assignment.pk).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    response = client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "2"},
        follow=True,
    )
    assert b"time for this item ran out" in response.content
    assert not HumanJudgment.objects.exists()


def test_another_workers_item_is_not_found(study: Study) -> None:
    mine, theirs = Client(), Client()
    enter_and_consent(mine, study, "PID1")
    enter_and_consent(theirs, study, "PID2")
    their_item = open_item(theirs, study)
    url = f"/work/{study.slug}/item/{their_item.public_id}/"
    assert mine.get(url).status_code == 404
    posted = mine.post(url, {"submission_id": str(uuid.uuid4()), "likert": "1"})
    assert posted.status_code == 404
    assert not HumanJudgment.objects.exists()


def test_the_completion_code_comes_after_the_last_judgment(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    assert client.get(f"/work/{study.slug}/done/")["Location"] == f"/work/{study.slug}/"
    for _ in range(2):
        assignment = open_item(client, study)
        client.post(
            f"/work/{study.slug}/item/{assignment.public_id}/",
            {"submission_id": str(uuid.uuid4()), "likert": "7"},
        )
    response = client.get(f"/work/{study.slug}/", follow=True)
    assert b"C0DE42" in response.content
    assert b"app.prolific.com/submissions/complete?cc=C0DE42" in response.content


def test_stopping_early_releases_the_item_and_gives_the_partial_code(
    client: Client, study: Study
) -> None:
    study.partial_completion_code = "PART42"
    study.save()
    enter_and_consent(client, study, "PID1")
    first = open_item(client, study)
    client.post(
        f"/work/{study.slug}/item/{first.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "3"},
    )
    held = open_item(client, study)
    response = client.post(f"/work/{study.slug}/stop/", follow=True)
    assert b"PART42" in response.content and b"C0DE42" not in response.content
    held.refresh_from_db()
    assert held.status == Assignment.Status.RETURNED


def test_a_worker_arriving_with_no_work_left_gets_no_code(client: Client, study: Study) -> None:
    study.overlap = 1
    study.save()
    Assignment.objects.bulk_create(
        Assignment(
            study=study,
            pair=pair,
            worker=Worker.objects.get(external_id="PID-wendy-worker"),
            a_left=True,
            reserved_at=timezone.now(),
            expires_at=timezone.now() + timedelta(minutes=10),
        )
        for pair in study.pairs.all()
    )
    enter_and_consent(client, study, "PID1")
    response = client.get(f"/work/{study.slug}/")
    assert response.status_code == 200
    # Every pair is held by someone else, not finished: come back later, no code.
    assert b"Come back in a few minutes" in response.content
    assert b"C0DE42" not in response.content
    assert b"C0DE42" not in client.get(f"/work/{study.slug}/done/", follow=True).content
    Assignment.objects.filter(study=study).update(status=Assignment.Status.SUBMITTED)
    response = client.get(f"/work/{study.slug}/")
    assert b"No work available" in response.content and b"C0DE42" not in response.content


def test_a_blocked_worker_is_stopped_with_a_clear_page(client: Client, study: Study) -> None:
    worker = enter_and_consent(client, study, "PID1")
    Worker.objects.filter(pk=worker.pk).update(state=Worker.State.BLOCKED)
    response = client.get(f"/work/{study.slug}/")
    assert response.status_code == 403
    assert b"check questions" in response.content


def test_someone_who_did_not_enter_through_a_panel_link_is_turned_away(
    client: Client, study: Study, cast: Cast
) -> None:
    client.force_login(cast.outsider)
    response = client.get(f"/work/{study.slug}/")
    assert response.status_code == 403
    assert b"link your panel gave you" in response.content


def test_the_demo_door_is_shut_unless_the_settings_open_it(
    client: Client, study: Study, settings
) -> None:
    url = f"/work/{study.slug}/enter/demo/?participant=alice"
    settings.CONCORD_DEMO_PANEL = False
    assert client.get(url).status_code == 403
    settings.CONCORD_DEMO_PANEL = True
    assert client.get(url)["Location"] == f"/work/{study.slug}/consent/"
    assert Worker.objects.filter(panel=Worker.Panel.DEMO, external_id="alice").exists()


def test_an_unknown_panel_or_study_link_is_not_found(client: Client, study: Study) -> None:
    assert client.get(f"/work/{study.slug}/enter/mturk/?workerId=A1").status_code == 404
    assert client.get("/work/no-such-study/enter/prolific/").status_code == 404


def test_a_break_keeps_the_item_and_continuing_returns_to_it(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    held = open_item(client, study)
    page = client.get(f"/work/{study.slug}/pause/")
    assert page.status_code == 200 and b"stays yours until" in page.content
    # Coming back later through the same link lands on the same item.
    client.get(prolific_url(study, "PID1"))
    assert open_item(client, study) == held


def test_a_returned_worker_sees_the_session_ended_without_a_code(
    client: Client, study: Study
) -> None:
    worker = enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "3"},
    )
    Worker.objects.filter(pk=worker.pk).update(state=Worker.State.RETURNED)
    response = client.get(f"/work/{study.slug}/", follow=True)
    assert response.redirect_chain[-1][0] == f"/work/{study.slug}/done/"
    assert b"Session ended" in response.content and b"C0DE42" not in response.content


def test_rationale_only_shows_the_winner_on_its_side_and_asks_why(
    client: Client, study: Study
) -> None:
    study.form_rationale_only = True
    study.save()
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    page = client.get(f"/work/{study.slug}/item/{assignment.public_id}/").content.decode()
    # make_pairs ranks the "first answer" 1; it is shown on the side the order put it.
    first_is_a = assignment.pair.answer_a.rank == 1
    side = "left" if first_is_a == assignment.a_left else "right"
    assert f"The <strong>{side}</strong> answer was rated better" in page
    assert 'name="likert"' not in page and 'name="values"' in page
    client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/",
        {"submission_id": str(uuid.uuid4()), "values": ["ethics", "clarity"]},
    )
    judgment = HumanJudgment.objects.get(assignment=assignment)
    assert judgment.preference == ("A" if first_is_a else "B")
    assert judgment.values == ["ethics", "clarity"]


def test_acceptability_and_axes_posted_from_the_page_are_saved_by_answer(
    client: Client, study: Study
) -> None:
    study.form_acceptability = True
    study.form_axes = True
    study.save()
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    axes = {
        f"axes_{side}_{axis}": level
        for side, level in (("left", "yes"), ("right", "no"))
        for axis in ("relevance", "usefulness", "factuality")
    }
    client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/",
        {
            "submission_id": str(uuid.uuid4()),
            "likert": "1",
            "acceptability_left": "accept",
            "acceptability_right": "reject",
            **axes,
        },
    )
    judgment = HumanJudgment.objects.get(assignment=assignment)
    left, right = ("a", "b") if assignment.a_left else ("b", "a")
    assert getattr(judgment, f"acceptability_{left}") == "accept"
    assert getattr(judgment, f"acceptability_{right}") == "reject"
    assert judgment.axes[left]["factuality"] == "yes" and judgment.axes[right]["relevance"] == "no"


def test_opening_an_item_whose_time_ran_out_moves_on_to_a_new_one(
    client: Client, study: Study
) -> None:
    enter_and_consent(client, study, "PID1")
    stale = open_item(client, study)
    Assignment.objects.filter(pk=stale.pk).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    response = client.get(f"/work/{study.slug}/item/{stale.public_id}/", follow=True)
    assert b"time for that item ran out" in response.content
    fresh = Assignment.objects.get(worker__external_id="PID1", status=Assignment.Status.RESERVED)
    assert fresh.pk != stale.pk and response.redirect_chain[-1][0].endswith(
        f"/item/{fresh.public_id}/"
    )


@pytest.mark.parametrize(
    ("required", "wording", "accepted"),
    [(True, "pick at least one", False), (False, "pick all that apply, or none", True)],
)
def test_the_seven_value_form_says_the_rule_it_enforces(
    client: Client, study: Study, required: bool, wording: str, accepted: bool
) -> None:
    study.form_values = True
    study.values_required = required
    study.save()
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    page = client.get(f"/work/{study.slug}/item/{assignment.public_id}/").content.decode()
    assert f'<span class="note" id="values-rule">({wording}' in page
    response = client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "2"},
    )
    assert HumanJudgment.objects.filter(assignment=assignment).exists() is accepted
    assert response.status_code == (302 if accepted else 400)
