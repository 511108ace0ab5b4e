"""Test connection is made by a worker and polled from the page, one pending test per judge.

Twelve clicks at a slow server used to hold twelve web workers 12-15 s each (nine would stall
the site): the request made the call itself. Now the request queues the test and returns; the
worker makes it under its short deadline; the page polls a small JSON status.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.conf import LazySettings, settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from core.broker import queue_length
from core.queues import Queue
from judges.models import Judge
from judges.services.connection import judge_connection_test_pending, judge_connection_test_run
from judges.services.judges import judge_create
from tests.conftest import PASSWORD, Cast
from tests.judges.fake_openai import API_KEY, FakeOpenAI
from tests.judges.integration import broker_purge, broker_url_set, free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def slow() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server that takes 3 s over every reply."""
    server = FakeOpenAI(delay=3.0).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _empty_default_queue() -> Iterator[None]:
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    yield
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)


def judge_for(study: Study, fake: FakeOpenAI) -> Judge:
    return judge_create(
        name=f"gpt-slow-{study.slug}",
        kind=Judge.Kind.LLM,
        model_name="gpt-4-fake",
        base_url=fake.base_url,
        api_key=API_KEY,
        template_name="likert",
        study=study,
    )


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def urls(judge: Judge) -> tuple[str, str]:
    slug = judge.study.slug if judge.study else ""
    return (
        reverse("judges:judge_test", args=[slug, judge.pk]),
        reverse("judges:judge_detail", args=[slug, judge.pk]),
    )


def status_url(judge: Judge, test_id: str) -> str:
    slug = judge.study.slug if judge.study else ""
    return reverse("judges:judge_test_status", args=[slug, judge.pk, test_id])


def test_a_click_returns_at_once_and_the_page_gets_the_workers_answer(
    cast: Cast, slow: FakeOpenAI
) -> None:
    judge = judge_for(cast.study, slow)
    client = client_for(cast.researcher)
    test_url, page_url = urls(judge)
    started = time.monotonic()
    response = client.post(test_url)
    took = time.monotonic() - started
    assert response.status_code == 302
    # The request made no call: the server has seen nothing, and it answers only after 3 s.
    assert not slow.requests() and took < 2.0
    test_id = response["Location"].split("?test=")[1]
    assert queue_length(Queue.DEFAULT) == 1
    page = client.get(response["Location"]).content.decode()
    assert 'data-state="pending"' in page and "connection_test.js" in page
    assert client.get(status_url(judge, test_id)).json() == {"state": "pending"}

    assert judge_connection_test_run(judge_id=judge.pk)  # the worker's side, 3 s
    answer = client.get(status_url(judge, test_id)).json()
    assert answer["state"] == "done" and answer["ok"] is True
    assert "gpt-4-fake at http://127.0.0.1:" in answer["message"]
    assert "answered in" in answer["message"] and API_KEY not in answer["message"]
    assert slow.requests()["unmarked"] == 1
    # The page, reloaded without the test's id, shows nothing pending any more.
    assert "connection-test" not in client.get(page_url).content.decode()
    assert "Connection works" in client.get(response["Location"]).content.decode()


def test_twelve_clicks_while_one_test_waits_queue_one_test(cast: Cast, slow: FakeOpenAI) -> None:
    judge = judge_for(cast.study, slow)
    client = client_for(cast.researcher)
    test_url, _ = urls(judge)
    responses = [client.post(test_url, follow=True) for _ in range(12)]
    locations = {response.redirect_chain[-1][0] for response in responses}
    assert len(locations) == 1  # every click was sent to the same pending test
    assert queue_length(Queue.DEFAULT) == 1
    already = sum("already under way" in r.content.decode() for r in responses)
    assert already == 11
    assert judge_connection_test_run(judge_id=judge.pk)
    assert judge_connection_test_pending(judge=judge) is None
    # A second delivery of the same message finds nothing pending and calls nobody.
    assert not judge_connection_test_run(judge_id=judge.pk)
    assert slow.requests()["unmarked"] == 1
    # Once answered, a click queues a new test.
    again = client.post(test_url)
    assert again["Location"] not in locations
    assert queue_length(Queue.DEFAULT) == 2


def test_a_server_slower_than_the_deadline_is_reported_by_the_worker(
    cast: Cast, slow: FakeOpenAI, settings: LazySettings
) -> None:
    settings.CONCORD_JUDGE_TEST_SECONDS = 1
    judge = judge_for(cast.study, slow)
    client = client_for(cast.researcher)
    response = client.post(urls(judge)[0])
    test_id = response["Location"].split("?test=")[1]
    judge_connection_test_run(judge_id=judge.pk)
    answer = client.get(status_url(judge, test_id)).json()
    assert (answer["state"], answer["ok"]) == ("done", False)
    assert "within 1 s" in answer["message"] or "timeout" in answer["message"]


def test_a_test_nobody_answered_is_lost_and_a_broker_refusal_queues_nothing(
    cast: Cast, slow: FakeOpenAI
) -> None:
    judge = judge_for(cast.study, slow)
    client = client_for(cast.researcher)
    assert client.get(status_url(judge, "0" * 32)).json() == {"state": "lost"}
    assert client.get(status_url(judge, "not-a-test-id")).json() == {"state": "lost"}
    with broker_url_set(f"redis://127.0.0.1:{free_port()}/0"):
        page = client.post(urls(judge)[0], follow=True).content.decode()
    assert "Connection test not queued" in page
    assert judge_connection_test_pending(judge=judge) is None  # the next click may queue


def test_only_the_studys_researchers_see_its_judges_tests(cast: Cast, slow: FakeOpenAI) -> None:
    judge = judge_for(cast.study, slow)
    response = client_for(cast.researcher).post(urls(judge)[0])
    test_id = response["Location"].split("?test=")[1]
    theirs = judge_for(cast.other_study, slow)
    mine = client_for(cast.researcher)
    # Another study's judge, through this study's address.
    assert (
        mine.post(reverse("judges:judge_test", args=[cast.study.slug, theirs.pk])).status_code
        == 404
    )
    assert (
        mine.get(
            reverse("judges:judge_test_status", args=[cast.study.slug, theirs.pk, test_id])
        ).status_code
        == 404
    )
    for user in (cast.worker_one.user, cast.outsider):
        assert isinstance(user, User)
        client = client_for(user)
        assert client.get(status_url(judge, test_id)).status_code == 404
        assert client.post(urls(judge)[0]).status_code == 404
    assert queue_length(Queue.DEFAULT) == 1
