"""The contrast set page's form: the command's options (window, seed, best-answer rule, system,
backbone, items), each refused with an error naming its field, and passed to the worker's build
(real PostgreSQL, Redis and sentence encoder on the CPU)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import LazySettings, settings
from django.core.cache import cache

from annotation.models import ContrastSet, Pair, System
from core.broker import queue_length
from core.queues import Queue
from judges.reward.encoder import DEFAULT_BACKBONE, backbone_path
from leaderboard.services.contrast_jobs import BACKBONE_REFUSED
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
    cache.clear()
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    yield
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)


def url(cast: Cast) -> str:
    return f"/studies/{cast.study.slug}/analysis/contrast/"


def other_system(cast: Cast) -> int:
    return System.objects.create(study=cast.other_study, name="elsewhere").pk


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"low": "abc"}, "Lowest cosine: give a number from -1 to 1."),
        ({"low": "1.5"}, "Lowest cosine: give a number from -1 to 1."),
        ({"low": "nan"}, "Lowest cosine: give a number from -1 to 1."),
        ({"high": "-2"}, "Highest cosine: give a number from -1 to 1."),
        ({"low": "0.9", "high": "0.8"}, "Highest cosine: 0.8 is below the lowest cosine 0.9."),
        ({"seed": "-1"}, "Seed: give a whole number from 0 to 2147483647."),
        ({"seed": "2147483648"}, "Seed: give a whole number from 0 to 2147483647."),
        ({"seed": "1.5"}, "Seed: give a whole number from 0 to 2147483647."),
        ({"best": "longest"}, "Best answer: not one of the choices."),
        (
            {"best": "system"},
            "System: choose whose answers are the best answers (the best answer is &#x27;A "
            "named system&#x27;s answer&#x27;).",
        ),
        (
            {"best": "first_ranked", "system": "top-bot"},
            "System: leave it at (none) unless the best answer is &#x27;A named system&#x27;s "
            "answer&#x27;.",
        ),
        ({"best": "system", "system": "other-study"}, "System: not one of the choices."),
        ({"backbone": "/etc"}, BACKBONE_REFUSED.replace("'", "&#x27;")),
        ({"backbone": "../../etc"}, BACKBONE_REFUSED.replace("'", "&#x27;")),
        ({"backbone": "x" * 201}, "Backbone: at most 200 characters."),
    ],
)
def test_a_bad_option_is_refused_naming_its_field_and_queues_nothing(
    cast: Cast, queue: None, data: dict[str, str], error: str
) -> None:
    make_study(cast.study, ["bread"])
    if data.get("system") == "top-bot":
        data["system"] = str(System.objects.get(study=cast.study, name="top-bot").pk)
    elif data.get("system") == "other-study":
        data["system"] = str(other_system(cast))
    response = client_for(cast.researcher).post(url(cast), data)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert queue_length(Queue.DEFAULT) == 0


def test_the_form_shows_the_commands_defaults(cast: Cast) -> None:
    make_study(cast.study, ["bread"])
    page = client_for(cast.researcher).get(url(cast)).content.decode()
    assert 'name="low" value="0.75"' in page and 'name="high" value="0.9"' in page
    assert 'name="seed" value="0"' in page
    assert '<option value="first_ranked" selected>' in page
    assert f'name="backbone" value="{DEFAULT_BACKBONE}"' in page
    assert ">top-bot</option>" in page and "elsewhere" not in page
    assert 'type="checkbox" name="items"' in page


def test_the_options_reach_the_build_and_are_shown_with_its_result(
    cast: Cast, queue: None, settings: LazySettings, tmp_path: Path
) -> None:
    # A sentence-transformers folder under the checkpoints root (a copy of the shipped one).
    root = tmp_path / "checkpoints"
    shutil.copytree(backbone_path(DEFAULT_BACKBONE), root / "minilm-copy")
    settings.CONCORD_PL_CHECKPOINTS_ROOT = root
    rows = make_study(cast.study, list(QUESTIONS))
    low_bot = System.objects.get(study=cast.study, name="low-bot")
    client = client_for(cast.researcher)
    response = client.post(
        url(cast),
        {
            "low": "0.8",
            "high": "0.87",
            "seed": "5",
            "best": "system",
            "system": str(low_bot.pk),
            "backbone": "minilm-copy",
            "items": "on",
        },
    )
    assert response.status_code == 302
    location = str(response["Location"])
    options = (
        "window [0.8, 0.87], seed 5, best answer: a named system&#x27;s answer (low-bot), "
        "backbone minilm-copy, items: created"
    )
    assert f"Options of this build: {options}." in client.get(location).content.decode()

    assert contrast_set_build_task(cast.study.pk)
    stored = ContrastSet.objects.get(study=cast.study)
    assert (stored.seed, stored.low, stored.high) == (5, 0.8, 0.87)
    assert (stored.best, stored.system_id) == ("system", low_bot.pk)
    assert stored.backbone == str((root / "minilm-copy").resolve())
    # The named system's answers are the best ones, not the first-ranked.
    worse = {answer.pk for _, _, answer in rows.values()}
    assert {c.answer_a_id for c in stored.pairs.all()} <= worse
    assert stored.pairs.count() == 2
    # --items: the contrast items of seed 5 were created.
    assert Pair.objects.filter(study=cast.study, contrast__isnull=False).count() > 0
    status = client.get(f"{url(cast)}build/{location.split('?build=')[1]}.json").json()
    assert status["state"] == "done" and status["ok"]
    assert status["options"] == options.replace("&#x27;", "'")
    assert "Contrast set (seed 5): stored." in status["message"]
    assert "Contrast items: " in status["message"] and " created" in status["message"]
    page = client.get(location).content.decode()
    assert f"Options of this build: {options}." in page
    assert "Seed 5: 2 pair(s), cosine [0.8, 0.87], best answer: a named system" in page


def test_a_build_without_options_uses_the_commands_defaults(cast: Cast, queue: None) -> None:
    make_study(cast.study, list(QUESTIONS))
    client = client_for(cast.researcher)
    location = str(client.post(url(cast), {}).get("Location"))
    assert contrast_set_build_task(cast.study.pk)
    stored = ContrastSet.objects.get(study=cast.study)
    assert (stored.seed, stored.low, stored.high, stored.best) == (0, 0.75, 0.9, "first_ranked")
    assert stored.backbone == DEFAULT_BACKBONE
    assert not Pair.objects.filter(study=cast.study, contrast__isnull=False).exists()
    status = client.get(f"{url(cast)}build/{location.split('?build=')[1]}.json").json()
    assert status["options"] == (
        "window [0.75, 0.9], seed 0, best answer: the first-ranked answer, "
        f"backbone {DEFAULT_BACKBONE}, items: not created"
    )
