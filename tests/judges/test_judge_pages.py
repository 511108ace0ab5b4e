"""Judges in the browser: connect one from a template with a pasted key, test it, run it, and
find its calls by pair; the key never comes back out."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from annotation.models import Study
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.calls import judge_call_execute
from judges.services.connection import judge_connection_test, judge_connection_test_run
from judges.services.judges import judge_create, judge_readiness
from judges.services.keys import judge_api_key
from judges.services.runs import judge_run_start
from leaderboard.selectors.exports import EXPORT_TABLES
from leaderboard.services.exports import EXPORT_FORMATS, study_export
from tests.conftest import PASSWORD, Cast
from tests.judges.conftest import KEY_ENV, make_marked_pairs
from tests.judges.fake_openai import API_KEY, FakeOpenAI, Fault

pytestmark = pytest.mark.django_db


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def create_form(fake: FakeOpenAI, **changes: str) -> dict[str, str]:
    data = {
        "name": "gpt-fake-pasted",
        "template": "likert",
        "model_name": "gpt-4-fake",
        "base_url": fake.base_url,
        "key_source": "paste",
        "api_key": API_KEY,
        "api_key_env": "",
        "price_input_per_mtok": "10",
        "price_output_per_mtok": "30",
        "requests_per_minute": "",
        "order_policy": "both",
    }
    data.update(changes)
    return data


def pasted_judge(study: Study, fake: FakeOpenAI, key: str = API_KEY) -> Judge:
    return judge_create(
        name="gpt-fake-pasted",
        kind=Judge.Kind.LLM,
        model_name="gpt-4-fake",
        base_url=fake.base_url,
        api_key=key,
        template_name="likert",
        study=study,
    )


def test_a_researcher_connects_a_judge_from_a_template_with_a_pasted_key(
    cast: Cast, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    client = client_for(cast.researcher)
    url = reverse("judges:judge_create", args=[cast.study.slug])
    response = client.post(url, create_form(fake))
    judge = Judge.objects.get(name="gpt-fake-pasted")
    assert response["Location"] == reverse("judges:judge_detail", args=[cast.study.slug, judge.pk])
    assert judge.study == cast.study and judge.api_key_env == ""
    assert judge.api_key_encrypted and API_KEY not in judge.api_key_encrypted
    assert judge.output_format == "likert" and judge.template_hash
    page = client.get(response["Location"]).content.decode()
    assert API_KEY not in page and judge.api_key_encrypted not in page
    assert "a key pasted on" in page and "stored encrypted" in page
    assert judge_readiness(judge=judge) == ""


def test_the_create_form_refuses_a_missing_key_and_a_host_off_the_allow_list(
    cast: Cast, fake: FakeOpenAI
) -> None:
    client = client_for(cast.researcher)
    url = reverse("judges:judge_create", args=[cast.study.slug])
    no_key = client.post(url, create_form(fake, api_key=""))
    assert no_key.status_code == 400 and "Paste the key" in no_key.content.decode()
    elsewhere = client.post(url, create_form(fake, base_url="https://judge.example.net/v1"))
    assert elsewhere.status_code == 400
    assert "CONCORD_JUDGE_HOST_ALLOWLIST" in elsewhere.content.decode()
    assert API_KEY not in elsewhere.content.decode()  # a refused form does not echo the key
    assert not Judge.objects.exists()


def test_a_judge_may_still_name_an_environment_variable(cast: Cast, fake: FakeOpenAI) -> None:
    client = client_for(cast.researcher)
    client.post(
        reverse("judges:judge_create", args=[cast.study.slug]),
        create_form(fake, key_source="env", api_key="", api_key_env=KEY_ENV),
    )
    judge = Judge.objects.get()
    assert (judge.api_key_env, judge.api_key_encrypted) == (KEY_ENV, "")


def test_a_pasted_key_is_what_the_judge_calls_with(
    cast: Cast, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(
        judge=pasted_judge(cast.study, fake), study=cast.study, user=cast.researcher
    )
    for call in run.calls.all():
        judge_call_execute(call_id=call.pk)
    statuses = set(run.calls.values_list("status", flat=True))
    assert statuses == {JudgeCall.Status.DONE}
    assert "unauthorised" not in fake.requests()  # the fake refuses any other key with 401


def test_a_stored_key_is_unreadable_under_another_secret_and_the_judge_says_so(
    cast: Cast, fake: FakeOpenAI
) -> None:
    judge = pasted_judge(cast.study, fake)
    assert judge_api_key(judge=judge) == API_KEY
    with override_settings(SECRET_KEY="another-secret-" + "y" * 40):
        assert "paste it again" in judge_readiness(judge=judge)


def test_test_connection_shows_the_answer(cast: Cast, fake: FakeOpenAI) -> None:
    judge = pasted_judge(cast.study, fake)
    client = client_for(cast.researcher)
    url = reverse("judges:judge_test", args=[cast.study.slug, judge.pk])
    response = client.post(url, follow=True)
    page = response.content.decode()
    assert "Testing the connection" in page and not fake.requests()  # queued, not made here
    assert judge_connection_test_run(judge_id=judge.pk)  # what the worker does
    text = client.get(response.redirect_chain[-1][0]).content.decode()  # the page, reloaded
    assert "Connection works: gpt-4-fake at http://127.0.0.1:" in text and "answered in" in text
    assert fake.requests()["unmarked"] == 1  # one call, and only one


def test_test_connection_shows_the_exact_error_without_the_key(
    cast: Cast, fake: FakeOpenAI
) -> None:
    wrong = "sk-wrong-key-0123456789"
    judge = pasted_judge(cast.study, fake, key=wrong)
    result = judge_connection_test(judge=judge)
    assert not result.ok
    assert "HTTP 401" in result.message and "Incorrect API key provided." in result.message
    assert wrong not in result.message


@override_settings(CONCORD_JUDGE_TEST_SECONDS=1)
def test_test_connection_gives_up_at_its_total_deadline(cast: Cast, fake: FakeOpenAI) -> None:
    fake.inject(Fault(kind="slow", seconds=3))
    result = judge_connection_test(judge=pasted_judge(cast.study, fake))
    assert not result.ok
    assert "within 1 s" in result.message or "timeout" in result.message


def test_the_key_is_never_logged_nor_exported(
    cast: Cast, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    caplog.set_level(logging.DEBUG)
    client = client_for(cast.researcher)
    client.post(reverse("judges:judge_create", args=[cast.study.slug]), create_form(fake))
    judge = Judge.objects.get()
    client.post(reverse("judges:judge_test", args=[cast.study.slug, judge.pk]))
    assert judge_connection_test_run(judge_id=judge.pk)
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    for call in run.calls.all():
        judge_call_execute(call_id=call.pk)
    assert API_KEY not in caplog.text and judge.api_key_encrypted not in caplog.text
    for table in EXPORT_TABLES:
        for fmt in EXPORT_FORMATS:
            data = study_export(study=cast.study, table=table, fmt=fmt)
            assert API_KEY.encode() not in data, (table, fmt)
            assert judge.api_key_encrypted.encode() not in data, (table, fmt)


def test_another_studys_judge_is_neither_shown_nor_runnable(cast: Cast, fake: FakeOpenAI) -> None:
    theirs = pasted_judge(cast.other_study, fake)
    client = client_for(cast.researcher)
    assert (
        client.get(reverse("judges:judge_detail", args=[cast.study.slug, theirs.pk])).status_code
        == 404
    )
    assert (
        client.post(reverse("judges:judge_test", args=[cast.study.slug, theirs.pk])).status_code
        == 404
    )
    runs = reverse("judges:run_list", args=[cast.study.slug])
    assert "gpt-fake-pasted" not in client.get(runs).content.decode()
    make_marked_pairs(cast.study, 1)
    assert client.post(runs, {"judge": theirs.pk}).status_code == 400
    assert not JudgeRun.objects.exists()


def test_annotators_and_outsiders_reach_no_judge_page(cast: Cast, fake: FakeOpenAI) -> None:
    judge = pasted_judge(cast.study, fake)
    for user in (cast.worker_one.user, cast.outsider):
        assert isinstance(user, User)
        client = client_for(user)
        for url in (
            reverse("judges:judge_create", args=[cast.study.slug]),
            reverse("judges:judge_detail", args=[cast.study.slug, judge.pk]),
        ):
            assert client.get(url).status_code == 404
        assert (
            client.post(reverse("judges:judge_test", args=[cast.study.slug, judge.pk])).status_code
            == 404
        )


def test_a_researcher_replaces_the_key_of_the_studys_own_judge(
    cast: Cast, fake: FakeOpenAI
) -> None:
    judge = pasted_judge(cast.study, fake, key="sk-old-key")
    client = client_for(cast.researcher)
    client.post(reverse("judges:judge_key", args=[cast.study.slug, judge.pk]), {"api_key": API_KEY})
    judge.refresh_from_db()
    assert judge_api_key(judge=judge) == API_KEY
    shared = judge_create(name="shared-coin", kind=Judge.Kind.RANDOM)
    response = client.post(
        reverse("judges:judge_key", args=[cast.study.slug, shared.pk]), {"api_key": "x"}
    )
    assert response.status_code == 404


def test_the_run_page_lists_calls_by_pair_with_both_systems_and_filters_by_status(
    cast: Cast, fake: FakeOpenAI
) -> None:
    make_marked_pairs(cast.study, 3)
    run = judge_run_start(
        judge=pasted_judge(cast.study, fake), study=cast.study, user=cast.researcher
    )
    first = run.calls.order_by("pair_id", "order").first()
    assert first is not None
    judge_call_execute(call_id=first.pk)
    client = client_for(cast.researcher)
    url = reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    page = client.get(url).content.decode()
    table = page.split('id="calls"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + 6
    assert "sys-one 1" in table and "sys-two 1" in table and "Question 0?" in table
    done = client.get(url, {"status": "done"}).content.decode().split('id="calls"', 1)[1]
    done = done.split("</table>", 1)[0]
    assert done.count("<tr>") == 2 and f"#{first.pk}<" in done
    assert '<option value="done" selected>' in client.get(url, {"status": "done"}).content.decode()


def test_a_finished_run_page_starts_no_polling(cast: Cast) -> None:
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(
        judge=judge_create(name="coin", kind=Judge.Kind.RANDOM),
        study=cast.study,
        user=cast.researcher,
    )
    for call in run.calls.all():
        judge_call_execute(call_id=call.pk)
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE
    page = client_for(cast.researcher).get(
        reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    )
    assert 'data-status="done"' in page.content.decode()


def test_the_launch_checklist_says_which_judges_are_ready(
    cast: Cast, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    pasted_judge(cast.study, fake)
    judge_create(
        name="env-judge",
        kind=Judge.Kind.LLM,
        model_name="m",
        base_url=fake.base_url,
        api_key_env=KEY_ENV,
        template_name="likert",
        study=cast.study,
    )
    page = client_for(cast.researcher).get(f"/studies/{cast.study.slug}/checklist/")
    row = page.content.decode().split('id="check-judges"', 1)[1].split("</tr>", 1)[0]
    assert "1 ready: gpt-fake-pasted" in row
    assert f"1 not ready: env-judge (not configured: set {KEY_ENV})" in row
