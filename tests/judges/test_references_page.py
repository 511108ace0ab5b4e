"""The references page: a click queues one job per study for a worker on the llm_judge queue,
the page polls how many prompts it has asked, and shows what it wrote, what it cost and each
failed prompt's reason (real PostgreSQL, Redis and the fake OpenAI server over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client

from annotation.models import Prompt
from annotation.roles import Role
from core.broker import queue_length
from core.queues import Queue
from judges.models import Judge, ReferenceCall
from judges.services import reference_jobs
from judges.tasks import references_write
from tests.annotation.test_pairs_page import client_for
from tests.conftest import Cast, make_user
from tests.judges.conftest import make_llm_judge
from tests.judges.fake_openai import FakeOpenAI, Fault
from tests.judges.integration import broker_purge


@pytest.fixture
def queue() -> Iterator[None]:
    cache.clear()  # a pending job another run left for the same study id
    broker_purge(settings.CELERY_BROKER_URL, Queue.LLM_JUDGE.value)
    yield
    broker_purge(settings.CELERY_BROKER_URL, Queue.LLM_JUDGE.value)


@pytest.fixture
def judge(cast: Cast, fake: FakeOpenAI, api_key: str) -> Judge:
    cast.study.reference_categories = ["math"]
    cast.study.save(update_fields=["reference_categories"])
    for ref in ("r1", "r2"):
        Prompt.objects.create(
            study=cast.study, external_id=ref, category="math", turns=[f"Sum (ref {ref}-A)?"]
        )
    Prompt.objects.create(study=cast.study, external_id="w1", category="writing", turns=["?"])
    return make_llm_judge(fake, name="ref-writer")


def url(cast: Cast) -> str:
    return f"/studies/{cast.study.slug}/judges/references/"


def click(client: Client, cast: Cast, judge: Judge) -> str:
    response = client.post(url(cast), {"judge": judge.pk})
    assert response.status_code == 302
    return str(response["Location"])


def status_url(cast: Cast, location: str) -> str:
    return f"{url(cast)}{location.split('?job=')[1]}.json"


def test_the_click_queues_a_job_and_the_worker_writes_the_references(
    cast: Cast, queue: None, judge: Judge, fake: FakeOpenAI
) -> None:
    client = client_for(cast.researcher)
    assert "2 prompt(s) in them: 0 with a reference (0 imported), 2 without" in (
        client.get(url(cast)).content.decode()
    )
    location = click(client, cast, judge)

    assert queue_length(Queue.LLM_JUDGE) == 1
    assert sum(fake.requests().values()) == 0  # nothing asked in the web request
    page = client.get(location).content.decode()
    assert "queued or running in a worker" in page and "connection_test.js" in page

    assert references_write(cast.study.pk, judge.pk)
    assert fake.requests() == {"r1:ab": 1, "r2:ab": 1}
    assert Prompt.objects.filter(study=cast.study, reference_turns__isnull=False).count() == 2
    status = client.get(status_url(cast, location)).json()
    cost = sum(row.cost_usd for row in ReferenceCall.objects.filter(study=cast.study))
    assert status["state"] == "done" and status["ok"]
    assert status["message"] == (
        f"2 references written by judge:ref-writer (gpt-4-fake) for math ({cost} USD on the "
        "reference ledger)."
    )
    page = client.get(location).content.decode()
    assert status["message"] in page
    assert "2 with a reference (0 imported), 0 without" in page
    assert '<td class="num">2</td><td class="num">0</td><td class="num">0</td>' in page
    assert f'<td class="num">{cost}</td>' in page


def test_a_second_click_while_one_is_queued_queues_nothing(
    cast: Cast, queue: None, judge: Judge
) -> None:
    client = client_for(cast.researcher)
    first = click(client, cast, judge)
    second = click(client, cast, judge)

    assert first == second and queue_length(Queue.LLM_JUDGE) == 1
    assert "already being written: nothing queued" in client.get(second).content.decode()
    assert references_write(cast.study.pk, judge.pk)
    assert not references_write(cast.study.pk, judge.pk)  # a redelivery finds none pending
    assert click(client, cast, judge) != first
    assert queue_length(Queue.LLM_JUDGE) == 2


def test_the_polled_status_counts_the_prompts_asked(
    cast: Cast, queue: None, judge: Judge, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(cast.researcher)
    location = click(client, cast, judge)
    status = status_url(cast, location)
    assert client.get(status).json() == {"state": "pending"}
    polled: list[dict[str, Any]] = []
    pages: list[str] = []
    record = reference_jobs.probe_progress

    def record_and_poll(**kwargs: Any) -> None:
        record(**kwargs)
        polled.append(client.get(status).json())
        pages.append(client.get(location).content.decode())

    monkeypatch.setattr("judges.services.reference_jobs.probe_progress", record_and_poll)
    assert references_write(cast.study.pk, judge.pk)

    assert [poll["state"] for poll in polled] == ["pending", "pending"]
    assert [poll["progress"] for poll in polled] == [
        {"step": "prompts asked", "done": done, "total": 2} for done in (1, 2)
    ]
    assert '<progress max="2" value="1">' in pages[0]
    assert client.get(status).json()["state"] == "done"


def test_a_failed_prompt_is_shown_with_its_reason(
    cast: Cast, queue: None, judge: Judge, fake: FakeOpenAI
) -> None:
    fake.inject(Fault("500", key="r2:ab"))
    client = client_for(cast.researcher)
    location = click(client, cast, judge)
    assert references_write(cast.study.pk, judge.pk)

    status = client.get(status_url(cast, location)).json()
    assert status["state"] == "done" and not status["ok"]
    assert "1 references written" in status["message"]
    assert "1 failed (r2: attempt 1: HTTP 500" in status["message"]
    page = client.get(location).content.decode()
    assert 'id="reference-failures"' in page
    failures = page.split('id="reference-failures"')[1]
    assert "<td>r2</td><td>ref-writer</td>" in failures and "HTTP 500" in failures


def test_a_judge_without_prices_is_refused_and_nothing_is_queued(
    cast: Cast, queue: None, judge: Judge
) -> None:
    Judge.objects.filter(pk=judge.pk).update(price_input_per_mtok=0, price_output_per_mtok=0)
    client = client_for(cast.researcher)
    location = click(client, cast, judge)

    assert "?judge=" in location and queue_length(Queue.LLM_JUDGE) == 0
    page = client.get(location).content.decode()
    assert "References not queued: judge &#x27;ref-writer&#x27; has no prices" in page


@pytest.mark.parametrize("who", ["annotator", "outsider", "researcher of another study"])
def test_others_get_404_and_queue_nothing(cast: Cast, queue: None, judge: Judge, who: str) -> None:
    if who == "annotator":
        user = cast.worker_one.user
    elif who == "outsider":
        user = cast.outsider
    else:
        user = make_user("rex-researcher", Role.RESEARCHER)
    assert user is not None
    client = Client()
    client.force_login(user)
    assert client.get(url(cast)).status_code == 404
    assert client.post(url(cast), {"judge": judge.pk}).status_code == 404
    assert client.get(f"{url(cast)}{'0' * 32}.json").status_code == 404
    assert queue_length(Queue.LLM_JUDGE) == 0


def test_the_study_and_judge_pages_link_to_the_references_page(cast: Cast, judge: Judge) -> None:
    client = client_for(cast.researcher)
    assert url(cast) in client.get(f"/studies/{cast.study.slug}/").content.decode()
    page = client.get(f"/studies/{cast.study.slug}/judges/{judge.pk}/").content.decode()
    assert f"{url(cast)}?judge={judge.pk}" in page


def test_admins_read_the_reference_ledger_in_the_admin_and_never_edit_it(
    cast: Cast, queue: None, judge: Judge
) -> None:
    client = client_for(cast.researcher)
    click(client, cast, judge)
    references_write(cast.study.pk, judge.pk)
    row = ReferenceCall.objects.filter(study=cast.study).first()
    assert row is not None
    admin = Client()
    admin.force_login(cast.admin)
    listing = admin.get("/admin/judges/referencecall/")
    assert listing.status_code == 200 and "ref-writer" in listing.content.decode()
    assert admin.get("/admin/judges/referencecall/add/").status_code == 403
    change = admin.get(f"/admin/judges/referencecall/{row.pk}/change/")
    assert change.status_code == 200 and 'type="submit" value="Save"' not in change.content.decode()
