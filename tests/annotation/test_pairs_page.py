"""The researcher's pairs page: who may see it, what it shows, and generating from it."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Pair, System
from annotation.roles import Role
from annotation.services import pairs_jobs
from annotation.services.pairs import PairsGenerationError, pairs_generate
from annotation.services.pairs_jobs import pairs_generation_run
from annotation.tasks import pairs_generate_task
from core.broker import queue_length
from core.queues import Queue
from tests.annotation.test_pairs import make_prompts, rank_answers
from tests.conftest import PASSWORD, Cast, make_user
from tests.judges.integration import broker_purge


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def url(cast: Cast) -> str:
    return f"/studies/{cast.study.slug}/pairs/"


def test_a_member_researcher_sees_counts_and_system_names(cast: Cast) -> None:
    make_prompts(cast.study, 2)
    pairs_generate(study=cast.study, strategy="all")
    response = client_for(cast.researcher).get(url(cast))
    assert response.status_code == 200
    body = response.content.decode()
    assert "12 pairs, 0 of them gold" in body
    assert "alpha 1" in body and "delta 1" in body
    assert "p000" in body and "coding" in body and "writing" in body


def test_the_study_page_links_to_the_pairs_page_for_researchers(cast: Cast) -> None:
    response = client_for(cast.researcher).get(f"/studies/{cast.study.slug}/")
    assert url(cast).encode() in response.content


def test_an_admin_may_open_any_studys_pairs_page(cast: Cast) -> None:
    client = client_for(cast.admin)
    assert client.get(url(cast)).status_code == 200
    assert client.get(f"/studies/{cast.other_study.slug}/pairs/").status_code == 200


def test_a_researcher_who_is_not_a_member_gets_404(cast: Cast) -> None:
    stranger = make_user("sam-stranger", Role.RESEARCHER)
    client = client_for(stranger)
    assert client.get(url(cast)).status_code == 404
    assert client.post(url(cast), {"strategy": "all", "turns": "all", "seed": 0}).status_code == 404
    assert not Pair.objects.exists()


def test_a_member_researcher_without_the_add_pair_permission_gets_404(cast: Cast) -> None:
    group = Group.objects.get(name=Role.RESEARCHER)
    group.permissions.remove(Permission.objects.get(codename="add_pair"))
    assert client_for(cast.researcher).get(url(cast)).status_code == 404


@pytest.mark.parametrize("who", ["annotator", "outsider"])
def test_annotators_and_outsiders_get_404(cast: Cast, who: str) -> None:
    user = cast.worker_one.user if who == "annotator" else cast.outsider
    assert isinstance(user, User)
    client = client_for(user)
    assert client.get(url(cast)).status_code == 404
    assert client.post(url(cast), {"strategy": "all", "turns": "all", "seed": 0}).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(cast: Cast) -> None:
    response = Client().get(url(cast))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.fixture
def queue() -> Iterator[None]:
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    yield
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)


def run_generation(client: Client, cast: Cast, response: Any) -> dict[str, Any]:
    """Run the queued task as the worker does; the page's status JSON for the click."""
    generation_id = response["Location"].split("?generation=")[1]
    assert pairs_generate_task(cast.study.pk)
    status = client.get(f"{url(cast)}generation/{generation_id}.json").json()
    assert status["state"] == "done"
    return status


def test_posting_the_form_queues_the_generation_and_the_worker_makes_the_pairs(
    cast: Cast, queue: None
) -> None:
    make_prompts(cast.study, 2)
    baseline = System.objects.get(study=cast.study, name="alpha")
    client = client_for(cast.researcher)
    form = {"strategy": "baseline", "baseline": baseline.pk, "turns": "all", "seed": 0}
    response = client.post(url(cast), form)
    assert response.status_code == 302 and "?generation=" in response["Location"]
    # Not in the request: one message on the queue, no pairs yet, the page says it is under way.
    assert queue_length(Queue.DEFAULT) == 1
    assert not Pair.objects.exists()
    pending = client.get(response["Location"]).content.decode()
    assert 'data-state="pending"' in pending and "connection_test.js" in pending
    assert "Generating pairs" in pending
    status = run_generation(client, cast, response)
    assert status["ok"] is True
    assert "baseline pairs: 6 created, 0 already present" in status["message"]
    assert Pair.objects.filter(study=cast.study, source=Pair.Source.BASELINE).count() == 6
    done = client.get(response["Location"]).content.decode()
    assert "baseline pairs: 6 created" in done and "connection_test.js" not in done


def test_the_polled_status_counts_the_pairs_written_while_the_worker_writes(
    cast: Cast, queue: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_prompts(cast.study, 2)  # 12 pairs of all systems
    monkeypatch.setattr("annotation.services.pairs.PAIRS_WRITE_BATCH", 5)
    client = client_for(cast.researcher)
    response = client.post(url(cast), {"strategy": "all", "turns": "all", "seed": 0})
    generation_id = response["Location"].split("?generation=")[1]
    status_url = f"{url(cast)}generation/{generation_id}.json"
    assert client.get(status_url).json() == {"state": "pending"}  # queued: no count yet
    polled: list[dict[str, Any]] = []
    pages: list[str] = []
    record = pairs_jobs.probe_progress

    def record_and_poll(**kwargs: Any) -> None:
        # The worker records its count; the page's poll, made right then, reads it.
        record(**kwargs)
        polled.append(client.get(status_url).json())
        pages.append(client.get(response["Location"]).content.decode())

    monkeypatch.setattr("annotation.services.pairs_jobs.probe_progress", record_and_poll)
    status = run_generation(client, cast, response)
    assert [poll["state"] for poll in polled] == ["pending"] * 4
    assert [poll["progress"] for poll in polled] == [
        {"step": "all pairs written", "done": done, "total": 12} for done in (0, 5, 10, 12)
    ]
    assert "all pairs written: 5 of 12" in pages[1]
    assert '<progress max="12" value="5">' in pages[1] and "connection_test.js" in pages[1]
    assert status["ok"] is True and "all pairs: 12 created" in status["message"]
    assert "progress" not in status


def test_a_second_click_while_one_is_queued_queues_nothing(cast: Cast, queue: None) -> None:
    make_prompts(cast.study, 2)
    client = client_for(cast.researcher)
    form = {"strategy": "all", "turns": "all", "seed": 0}
    first = client.post(url(cast), form)
    second = client.post(url(cast), form, follow=True)
    assert second.redirect_chain[-1][0] == first["Location"]
    assert "already under way: nothing queued" in second.content.decode()
    assert queue_length(Queue.DEFAULT) == 1
    # The page without ?generation= still shows the pending one.
    assert 'data-state="pending"' in client.get(url(cast)).content.decode()
    run_generation(client, cast, first)
    assert Pair.objects.filter(study=cast.study).count() == 12
    assert not pairs_generation_run(study_id=cast.study.pk)  # the redelivery finds none pending
    assert client.post(url(cast), form)["Location"] != first["Location"]  # free again
    assert queue_length(Queue.DEFAULT) == 2


def test_a_failed_generation_is_shown_and_makes_no_pairs(cast: Cast, queue: None) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    make_prompts(cast.study, 2)
    client = client_for(cast.researcher)
    # Contrast pairs with no contrast set fail: the gold pairs asked with them are not made.
    form = {"strategy": "contrast", "turns": "all", "seed": 5, "gold": "first_vs_last"}
    response = client.post(url(cast), form)
    status = run_generation(client, cast, response)
    assert status["ok"] is False and status["message"].startswith("Pairs not generated: ")
    page = client.get(response["Location"]).content.decode()
    assert "Pairs not generated" in page and 'data-state="done"' in page
    assert not Pair.objects.exists()


def test_regular_pairs_made_before_a_failing_gold_step_are_rolled_back(
    cast: Cast, queue: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_prompts(cast.study, 2)
    made: list[int] = []

    def gold_fails(**kwargs: Any) -> None:
        # The regular pairs exist inside the transaction when the gold step fails.
        made.append(Pair.objects.filter(study=cast.study).count())
        raise PairsGenerationError("no ranked answers to make gold pairs from")

    monkeypatch.setattr("annotation.services.pairs_jobs.gold_pairs_generate", gold_fails)
    client = client_for(cast.researcher)
    form = {"strategy": "all", "turns": "all", "seed": 0, "gold": "first_vs_last"}
    status = run_generation(client, cast, client.post(url(cast), form))
    assert made == [12]
    assert status["ok"] is False and "no ranked answers" in status["message"]
    assert not Pair.objects.filter(study=cast.study).exists()


def test_posting_gold_only_adds_gold_pairs(cast: Cast, queue: None) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    for prompt in make_prompts(cast.study, 2):
        rank_answers(prompt, {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4})
    form = {"strategy": "", "turns": "all", "seed": 0, "gold": "first_vs_last"}
    client = client_for(cast.researcher)
    status = run_generation(client, cast, client.post(url(cast), form))
    assert "Gold pairs (first_vs_last): 2 created" in status["message"]
    assert Pair.objects.filter(study=cast.study, is_gold=True).count() == 2


def test_a_sample_without_k_is_refused_with_a_message(cast: Cast) -> None:
    make_prompts(cast.study, 1)
    form = {"strategy": "sample", "turns": "all", "seed": 0}
    response = client_for(cast.researcher).post(url(cast), form)
    assert response.status_code == 400
    assert "The sample strategy needs k" in response.content.decode()
    assert not Pair.objects.exists()


def test_a_baseline_from_another_study_cannot_be_chosen(cast: Cast) -> None:
    make_prompts(cast.study, 1)
    foreign = System.objects.create(study=cast.other_study, name="alpha", version="1")
    form = {"strategy": "baseline", "baseline": foreign.pk, "turns": "all", "seed": 0}
    response = client_for(cast.researcher).post(url(cast), form)
    assert response.status_code == 400
    assert not Pair.objects.exists()


def test_the_page_is_paginated_and_its_queries_do_not_grow_with_pairs(cast: Cast) -> None:
    client = client_for(cast.researcher)
    make_prompts(cast.study, 1)
    pairs_generate(study=cast.study, strategy="all")
    with CaptureQueriesContext(connection) as few:
        client.get(url(cast))
    make_prompts(cast.study, 10, prefix="more")
    pairs_generate(study=cast.study, strategy="all")
    with CaptureQueriesContext(connection) as many:
        response = client.get(url(cast))
    assert len(many.captured_queries) == len(few.captured_queries)
    assert "Page 1 of 2" in response.content.decode()
    assert "Page 2 of 2" in client.get(url(cast) + "?page=2").content.decode()
