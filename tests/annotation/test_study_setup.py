"""A researcher creates, configures, checks, previews and launches a study from the browser."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from annotation.models import Assignment, HumanJudgment, Study, StudyMembership
from annotation.roles import Role
from annotation.selectors.checklist import study_checklist, study_pay_plan
from annotation.services.studies import SETTINGS_FIELDS
from tests.annotation.work_helpers import make_pairs
from tests.conftest import PASSWORD, Cast, make_user

pytestmark = pytest.mark.django_db


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def settings_post(study: Study, **changes: Any) -> dict[str, Any]:
    """The settings form as the page would post it, with `changes` on top.

    The shared cast's study has the model's defaults, whose gold minimum (3) is more than the 2
    gold pairs a 20-judgment session at share 0.1 shows: the page refuses that, so the post
    lowers it to 2 unless a test says otherwise.
    """
    data: dict[str, Any] = {"gold_min_items": 2} if study.gold_min_items == 3 else {}
    for name in SETTINGS_FIELDS:
        value = getattr(study, name)
        if name in data:
            continue
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, list):
            data[name] = ", ".join(value)
        elif value is None:
            data[name] = ""
        else:
            data[name] = value
    for name, value in changes.items():
        if value is False:
            data.pop(name, None)
        elif value is True:
            data[name] = "on"
        else:
            data[name] = value
    return data


def test_a_new_study_is_created_with_a_gold_minimum_its_sessions_reach(cast: Cast) -> None:
    client_for(cast.researcher).post("/studies/new/", {"name": "Fresh", "slug": ""})
    study = Study.objects.get(slug="fresh")
    # 20 judgments at gold share 0.1 show 2 gold pairs: a minimum of 3 would never count.
    assert (study.target_per_worker, study.gold_share, study.gold_min_items) == (
        20,
        Decimal("0.100"),
        2,
    )


def test_a_researcher_creates_a_draft_study_and_becomes_its_member(cast: Cast) -> None:
    client = client_for(cast.researcher)
    response = client.post("/studies/new/", {"name": "Advice pairs, spring", "slug": ""})
    assert response.status_code == 302
    study = Study.objects.get(slug="advice-pairs-spring")
    assert response["Location"] == "/studies/advice-pairs-spring/settings/"
    assert study.status == Study.Status.DRAFT
    assert StudyMembership.objects.filter(study=study, user=cast.researcher).exists()
    assert client.get("/studies/advice-pairs-spring/").status_code == 200


def test_a_taken_or_reserved_short_name_is_refused_by_name(cast: Cast) -> None:
    client = client_for(cast.researcher)
    taken = client.post("/studies/new/", {"name": "Again", "slug": cast.study.slug})
    assert taken.status_code == 400 and b"exists already" in taken.content
    reserved = client.post("/studies/new/", {"name": "New", "slug": "new"})
    assert reserved.status_code == 400 and b"taken by a page" in reserved.content


def test_annotators_and_outsiders_cannot_create_or_configure_studies(cast: Cast) -> None:
    for user in (cast.worker_one.user, cast.outsider):
        assert isinstance(user, User)
        client = client_for(user)
        assert client.post("/studies/new/", {"name": "Mine"}).status_code == 404
        for page in ("settings", "checklist", "preview", "members"):
            assert client.get(f"/studies/{cast.study.slug}/{page}/").status_code == 404
    assert not Study.objects.filter(name="Mine").exists()


def test_a_researcher_cannot_configure_a_study_they_are_not_a_member_of(cast: Cast) -> None:
    client = client_for(cast.researcher)
    for page in ("settings", "checklist", "preview", "members"):
        assert client.get(f"/studies/{cast.other_study.slug}/{page}/").status_code == 404
    response = client.post(
        f"/studies/{cast.other_study.slug}/settings/",
        settings_post(cast.other_study, name="Hijacked"),
    )
    assert response.status_code == 404
    assert Study.objects.get(pk=cast.other_study.pk).name == "Other study"


def test_settings_are_saved_with_every_field_the_admin_form_lacked(cast: Cast) -> None:
    client = client_for(cast.researcher)
    response = client.post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(
            cast.study,
            completion_code="FULL-1234",
            partial_completion_code="PART-1234",
            prolific_study_id="65f0c0ffee0123456789abcd",
            completion_url="https://example.org/thanks",
            qualification_items=2,
            gold_share="0.25",
            gold_warn_accuracy="0.9",
            gold_block_accuracy="0.7",
            gold_min_items=2,
            target_per_worker=20,
            categories="advice, coding, advice",
            values_required=False,
            form_values=True,
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    study = Study.objects.get(pk=cast.study.pk)
    assert (study.completion_code, study.partial_completion_code, study.completion_url) == (
        "FULL-1234",
        "PART-1234",
        "https://example.org/thanks",
    )
    assert study.prolific_study_id == "65f0c0ffee0123456789abcd"
    assert (study.qualification_items, study.gold_min_items) == (2, 2)
    assert (study.gold_warn_accuracy, study.gold_block_accuracy) == (
        Decimal("0.900"),
        Decimal("0.700"),
    )
    assert study.categories == ["advice", "coding"]
    assert (study.form_values, study.values_required) == (True, False)


def test_a_partial_code_equal_to_the_full_code_is_refused(cast: Cast) -> None:
    response = client_for(cast.researcher).post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(cast.study, completion_code="SAME-1", partial_completion_code="SAME-1"),
    )
    assert response.status_code == 400
    assert 'id="error-partial_completion_code"' in response.content.decode()


def test_a_gold_minimum_no_session_can_reach_is_refused_with_the_reason(cast: Cast) -> None:
    client = client_for(cast.researcher)
    response = client.post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(cast.study, gold_share="0.1", target_per_worker=20, gold_min_items=3),
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'id="error-gold_min_items"' in body
    assert "about 2.0 gold pairs in 20 judgments" in body and "gold bonus" in body
    assert Study.objects.get(pk=cast.study.pk).gold_min_items == 3  # unchanged default


def test_a_block_threshold_above_the_warn_threshold_is_refused_by_field(cast: Cast) -> None:
    response = client_for(cast.researcher).post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(cast.study, gold_warn_accuracy="0.5", gold_block_accuracy="0.8"),
    )
    assert response.status_code == 400
    assert 'id="error-gold_block_accuracy"' in response.content.decode()


def test_active_selection_and_its_uniform_share_are_saved_from_the_settings_page(
    cast: Cast,
) -> None:
    client = client_for(cast.researcher)
    page = client.get(f"/studies/{cast.study.slug}/settings/").content.decode()
    assert 'name="selection"' in page and 'name="uniform_share"' in page
    assert (cast.study.selection, cast.study.uniform_share) == ("uniform", Decimal("0.200"))
    response = client.post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(cast.study, selection="active", uniform_share="0.35"),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    study = Study.objects.get(pk=cast.study.pk)
    assert (study.selection, study.uniform_share) == ("active", Decimal("0.350"))


@pytest.mark.parametrize("share", ["0", "1.5"])
def test_a_uniform_share_outside_0_to_1_is_refused_by_field(cast: Cast, share: str) -> None:
    response = client_for(cast.researcher).post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(cast.study, selection="active", uniform_share=share),
    )
    assert response.status_code == 400
    assert 'id="error-uniform_share"' in response.content.decode()
    assert Study.objects.get(pk=cast.study.pk).selection == "uniform"


def test_rationale_only_and_likert_together_are_refused(cast: Cast) -> None:
    response = client_for(cast.researcher).post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(cast.study, form_likert=True, form_rationale_only=True),
    )
    assert response.status_code == 400
    assert 'id="error-form_rationale_only"' in response.content.decode()


def test_the_instructions_preview_uses_the_workers_safe_renderer_and_saves_nothing(
    cast: Cast,
) -> None:
    response = client_for(cast.researcher).post(
        f"/studies/{cast.study.slug}/settings/",
        settings_post(
            cast.study,
            instructions="Read **both**.\n\n<script>alert(1)</script> [x](javascript:alert(1))",
            preview="1",
        ),
    )
    assert response.status_code == 200
    body = response.content.decode()
    preview = body.split('id="instructions-preview"', 1)[1].split("</div>", 1)[0]
    assert "<strong>both</strong>" in preview
    assert "<script>" not in preview and "&lt;script&gt;" in preview
    assert 'href="javascript' not in preview
    assert Study.objects.get(pk=cast.study.pk).instructions == ""


def test_changing_the_forms_asks_for_a_new_preview(cast: Cast) -> None:
    make_pairs(cast.study, 2)
    client = client_for(cast.researcher)
    assert client.get(f"/studies/{cast.study.slug}/preview/").status_code == 200
    assert Study.objects.get(pk=cast.study.pk).previewed_at is not None
    url = f"/studies/{cast.study.slug}/settings/"
    assert client.post(url, settings_post(cast.study, overlap=2)).status_code == 302
    assert Study.objects.get(pk=cast.study.pk).previewed_at is not None  # not a form change
    response = client.post(
        url, settings_post(Study.objects.get(pk=cast.study.pk), form_values=True)
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert Study.objects.get(pk=cast.study.pk).previewed_at is None


def test_the_preview_shows_an_item_as_workers_see_it_and_reserves_nothing(cast: Cast) -> None:
    cast.study.form_values = True
    cast.study.save()
    make_pairs(cast.study, 2, systems=("secret-model-x", "secret-model-y"))
    client = client_for(cast.researcher)
    page = client.get(f"/studies/{cast.study.slug}/preview/").content.decode()
    assert 'id="judgment-form"' in page and 'id="preview-banner"' in page
    assert "first answer" in page and "second answer" in page
    assert "secret-model" not in page  # blind, like the worker's page
    assert 'id="stop"' not in page
    refused = client.post(f"/studies/{cast.study.slug}/preview/", {"likert": "2"})
    assert refused.status_code == 400 and b"at least one reason" in refused.content
    accepted = client.post(
        f"/studies/{cast.study.slug}/preview/", {"likert": "2", "values": ["clarity"]}
    )
    assert accepted.status_code == 200 and b'id="preview-accepted"' in accepted.content
    assert not Assignment.objects.exists() and not HumanJudgment.objects.exists()


def ready_study(cast: Cast) -> Study:
    study = cast.study
    study.status = Study.Status.DRAFT
    study.gold_share = Decimal(0)
    study.completion_code = "FULL-OK"
    study.partial_completion_code = "PART-OK"
    study.prolific_study_id = "STUDY1"
    study.pay_per_judgment_cents = 20
    study.expected_seconds_per_judgment = 60
    study.hourly_floor_cents = 1200
    study.previewed_at = timezone.now()
    study.save()
    make_pairs(study, 4)
    return study


def test_the_checklist_counts_what_is_there_and_names_what_is_missing(cast: Cast) -> None:
    study = cast.study
    study.status = Study.Status.DRAFT
    study.save()
    items = {item.key: item for item in study_checklist(study=study).items}
    assert not items["data"].ok and items["data"].detail.startswith("0 prompts")
    assert not items["pairs"].ok and not items["preview"].ok and not items["prolific"].ok
    study = ready_study(cast)
    items = {item.key: item for item in study_checklist(study=study).items}
    assert items["data"].detail == "4 prompts, 8 answers from 2 systems"
    assert items["pairs"].detail.startswith("4 pairs and 0 gold pairs; at overlap 3 that is 12")
    assert all(item.ok for item in items.values() if item.blocking)


def test_the_pay_check_uses_the_expected_minutes(cast: Cast) -> None:
    study = ready_study(cast)
    study.pay_per_judgment_cents, study.expected_seconds_per_judgment = 15, 90
    study.target_per_worker = 20
    plan = study_pay_plan(study=study)
    # 15 cents every 90 s: 15 * 3600 / 90 = 600 cents an hour; 20 * 90 s = 30 minutes.
    assert (plan.hourly_cents, plan.minutes, plan.session_cents) == (600, 30, 300)
    assert not plan.meets_floor
    pay = {item.key: item for item in study_checklist(study=study).items}["pay"]
    assert not pay.ok and "$6.00 an hour against the floor of $12.00" in pay.detail


def test_launch_is_refused_while_an_item_is_open_and_names_it(cast: Cast) -> None:
    study = ready_study(cast)
    Study.objects.filter(pk=study.pk).update(prolific_study_id="")
    client = client_for(cast.researcher)
    response = client.post(f"/studies/{study.slug}/launch/", follow=True)
    assert b"Not launched: Prolific fields filled: missing: Prolific study id" in response.content
    assert Study.objects.get(pk=study.pk).status == Study.Status.DRAFT


def test_launch_makes_the_study_live_and_shows_the_prolific_entry_link(cast: Cast) -> None:
    study = ready_study(cast)
    client = client_for(cast.researcher)
    response = client.post(f"/studies/{study.slug}/launch/", follow=True)
    assert Study.objects.get(pk=study.pk).status == Study.Status.LIVE
    body = response.content.decode()
    link = (
        f"http://testserver/work/{study.slug}/enter/prolific/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&amp;STUDY_ID={{%STUDY_ID%}}&amp;SESSION_ID={{%SESSION_ID%}}"
    )
    assert f'value="{link}"' in body


def test_the_entry_link_of_a_study_that_requires_signing_carries_its_signature_and_admits(
    cast: Cast,
) -> None:
    study = ready_study(cast)
    Study.objects.filter(pk=study.pk).update(entry_link_required=True)
    client = client_for(cast.researcher)
    page = client.post(f"/studies/{study.slug}/launch/", follow=True).content.decode()
    link = page.split('id="entry-link" value="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert "&sig=" in link
    worker_link = (
        link.replace("http://testserver", "")
        .replace("{{%PROLIFIC_PID%}}", "PIDSIGNED")
        .replace("{{%STUDY_ID%}}", "STUDY1")
        .replace("{{%SESSION_ID%}}", "SESSIONS1")
    )
    arrived = Client().get(worker_link)
    assert arrived.status_code == 302 and arrived["Location"].endswith("/consent/")
    unsigned = Client().get(worker_link.split("&sig=", 1)[0])
    assert unsigned.status_code == 403


def test_a_live_study_is_paused_resumed_and_closed_from_its_page(cast: Cast) -> None:
    client = client_for(cast.researcher)
    url = f"/studies/{cast.study.slug}/status/"
    client.post(url, {"move": "pause"})
    assert Study.objects.get(pk=cast.study.pk).status == Study.Status.PAUSED
    client.post(url, {"move": "resume"})
    assert Study.objects.get(pk=cast.study.pk).status == Study.Status.LIVE
    client.post(url, {"move": "close"})
    assert Study.objects.get(pk=cast.study.pk).status == Study.Status.CLOSED
    response = client.post(url, {"move": "resume"}, follow=True)
    assert Study.objects.get(pk=cast.study.pk).status == Study.Status.CLOSED
    assert b"Launch a draft from its checklist" in response.content or b"cannot" in response.content


def test_members_are_added_by_username_or_email_with_their_role_and_removed(cast: Cast) -> None:
    colleague = make_user("cleo-colleague", Role.RESEARCHER)
    colleague.email = "cleo@example.org"
    colleague.save()
    client = client_for(cast.researcher)
    url = f"/studies/{cast.study.slug}/members/"
    assert client.post(url, {"identifier": "CLEO@example.org"}).status_code == 302
    assert client.post(url, {"identifier": "ada-admin"}).status_code == 302
    page = client.get(url).content.decode()
    row = page.split('id="member-cleo-colleague"', 1)[1].split("</tr>", 1)[0]
    assert "cleo@example.org" in row and "Researcher" in row
    assert "Admin" in page.split('id="member-ada-admin"', 1)[1].split("</tr>", 1)[0]
    client.post(f"{url}{colleague.pk}/remove/")
    assert not StudyMembership.objects.filter(study=cast.study, user=colleague).exists()


def test_workers_outsiders_and_unknown_names_are_not_added(cast: Cast) -> None:
    client = client_for(cast.researcher)
    url = f"/studies/{cast.study.slug}/members/"
    worker_user = cast.worker_one.user
    assert worker_user is not None
    for identifier, message in (
        (worker_user.username, "is not a researcher"),
        (cast.outsider.username, "is not a researcher"),
        ("nobody@example.org", "No active user"),
    ):
        response = client.post(url, {"identifier": identifier})
        assert response.status_code == 400 and message in response.content.decode()
    assert StudyMembership.objects.filter(study=cast.study).count() == 1


def test_the_last_member_cannot_be_removed(cast: Cast) -> None:
    client = client_for(cast.researcher)
    response = client.post(
        f"/studies/{cast.study.slug}/members/{cast.researcher.pk}/remove/", follow=True
    )
    assert b"last member" in response.content
    assert StudyMembership.objects.filter(study=cast.study, user=cast.researcher).exists()
