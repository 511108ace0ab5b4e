"""The contrast set page: a click queues a build for a worker, one per study at a time, and the
page shows what the worker found (real PostgreSQL, Redis and sentence encoder on the CPU)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings, settings
from django.core.cache import cache
from django.test import Client

from annotation.models import ContrastSet
from core.broker import queue_length
from core.queues import Queue
from leaderboard.services import contrast_jobs
from leaderboard.tasks import contrast_set_build_task
from tests.annotation.test_pairs_page import client_for
from tests.conftest import Cast
from tests.judges.integration import broker_purge
from tests.leaderboard.test_contrast_build import (  # the encoder's cache fixtures too
    QUESTIONS,
    embedding_cache,
    make_study,
    private_cache,
)

__all__ = ["embedding_cache", "private_cache"]


@pytest.fixture
def queue() -> Iterator[None]:
    cache.clear()  # a pending build another run left for the same study id
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    yield
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)


def url(cast: Cast) -> str:
    return f"/studies/{cast.study.slug}/analysis/contrast/"


def click(client: Client, cast: Cast) -> str:
    response = client.post(url(cast))
    assert response.status_code == 302
    return str(response["Location"])


def test_the_click_queues_a_build_and_the_worker_stores_the_set(cast: Cast, queue: None) -> None:
    make_study(cast.study, list(QUESTIONS))
    client = client_for(cast.researcher)
    location = click(client, cast)

    assert queue_length(Queue.DEFAULT) == 1
    assert not ContrastSet.objects.filter(study=cast.study).exists()
    page = client.get(location).content.decode()
    assert "queued or running in a worker" in page
    assert "connection_test.js" in page

    assert contrast_set_build_task(cast.study.pk)
    assert ContrastSet.objects.get(study=cast.study, seed=0).pairs.count() == 2
    build_id = location.split("?build=")[1]
    status = client.get(f"{url(cast)}build/{build_id}.json").json()
    assert status["state"] == "done" and status["ok"]
    page = client.get(location).content.decode()
    assert "Found 2 contrast pair(s) among 6 prompts" in page
    assert "Seed 0: 2 pair(s)" in page


def test_the_polled_status_counts_the_questions_embedded_while_the_worker_embeds(
    cast: Cast, queue: None, monkeypatch: pytest.MonkeyPatch, settings: LazySettings, tmp_path: Path
) -> None:
    settings.CONCORD_REWARD_CACHE_DIR = tmp_path  # nothing embedded yet: all 6 are encoded now
    monkeypatch.setattr("judges.reward.encoder.ENCODE_PROGRESS_CHUNK", 4)
    make_study(cast.study, list(QUESTIONS))
    client = client_for(cast.researcher)
    location = click(client, cast)
    status_url = f"{url(cast)}build/{location.split('?build=')[1]}.json"
    assert client.get(status_url).json() == {"state": "pending"}
    polled: list[dict[str, Any]] = []
    pages: list[str] = []
    record = contrast_jobs.probe_progress

    def record_and_poll(**kwargs: Any) -> None:
        # The worker records its count; the page's poll, made right then, reads it.
        record(**kwargs)
        polled.append(client.get(status_url).json())
        pages.append(client.get(location).content.decode())

    monkeypatch.setattr("leaderboard.services.contrast_jobs.probe_progress", record_and_poll)
    assert contrast_set_build_task(cast.study.pk)
    assert [poll["state"] for poll in polled] == ["pending"] * 3
    assert [poll["progress"] for poll in polled] == [
        {"step": "questions embedded", "done": done, "total": 6} for done in (0, 4, 6)
    ]
    assert "questions embedded: 4 of 6" in pages[1]
    assert '<progress max="6" value="4">' in pages[1]
    done = client.get(status_url).json()
    assert done["state"] == "done" and done["ok"] and "progress" not in done


def test_too_few_pairs_show_the_counts_and_the_nearest_cosine(cast: Cast, queue: None) -> None:
    make_study(cast.study, ["bread", "poem", "capital", "vaccines"])
    client = client_for(cast.researcher)
    location = click(client, cast)
    assert contrast_set_build_task(cast.study.pk)

    page = client.get(location).content.decode()
    assert "Contrast set not built: Found 0 contrast pair(s) among 4 prompts" in page
    assert "of 6 prompt pairs, none has a question cosine in [0.75, 0.9]" in page
    assert "the most similar two have cosine 0." in page
    assert not ContrastSet.objects.filter(study=cast.study).exists()


def test_a_second_click_while_one_is_queued_queues_nothing(cast: Cast, queue: None) -> None:
    client = client_for(cast.researcher)
    first = click(client, cast)
    second = click(client, cast)

    assert first == second
    assert queue_length(Queue.DEFAULT) == 1
    assert "already under way: nothing queued" in client.get(second).content.decode()
    assert contrast_set_build_task(cast.study.pk)  # no prompts: a failure, shown, and freed
    assert "Contrast set not built" in client.get(second).content.decode()
    assert not contrast_set_build_task(cast.study.pk)  # a redelivery finds none pending
    assert click(client, cast) != first
    assert queue_length(Queue.DEFAULT) == 2


@pytest.mark.parametrize("who", ["annotator", "outsider"])
def test_others_get_404_and_queue_nothing(cast: Cast, queue: None, who: str) -> None:
    user = cast.worker_one.user if who == "annotator" else cast.outsider
    assert user is not None
    client = Client()
    client.force_login(user)
    assert client.get(url(cast)).status_code == 404
    assert client.post(url(cast)).status_code == 404
    assert client.get(f"{url(cast)}build/x.json").status_code == 404
    assert queue_length(Queue.DEFAULT) == 0


def test_the_study_page_links_to_the_contrast_page(cast: Cast) -> None:
    page = client_for(cast.researcher).get(f"/studies/{cast.study.slug}/").content.decode()
    assert url(cast) in page
