"""Contrast sets are stored whole and checked; the "contrast" strategy turns them into items that
look to a worker like every other item."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.test import Client

from annotation.models import Answer, ContrastSet, Pair, Prompt, Study, System
from annotation.services.contrast import (
    ContrastPairSpec,
    ContrastSetError,
    contrast_set_store,
)
from annotation.services.pairs import PairsGenerationError, gold_pairs_generate, pairs_generate
from annotation.services.pairs_jobs import pairs_generation_run
from core.queues import Queue
from tests.annotation.work_helpers import enter_and_consent
from tests.conftest import PASSWORD, Cast
from tests.judges.integration import broker_purge

SECRET_SYSTEM = "Zyzzyva-Quokka-9000"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def make_prompts(study: Study, count: int) -> list[tuple[Prompt, Answer, Answer]]:
    """`count` prompts, each with a first-ranked and a second-ranked answer."""
    first, _ = System.objects.get_or_create(study=study, name=SECRET_SYSTEM, version="1")
    second, _ = System.objects.get_or_create(study=study, name="other-bot", version="1")
    out = []
    for i in range(count):
        prompt = Prompt.objects.create(study=study, external_id=f"q{i}", turns=[f"Question {i}?"])
        best = Answer.objects.create(prompt=prompt, system=first, turns=[f"best {i}"], rank=1)
        worse = Answer.objects.create(prompt=prompt, system=second, turns=[f"worse {i}"], rank=2)
        out.append((prompt, best, worse))
    return out


def spec(
    first: tuple[Prompt, Answer, Answer], second: tuple[Prompt, Answer, Answer]
) -> ContrastPairSpec:
    return ContrastPairSpec(first[0].pk, second[0].pk, first[1].pk, second[1].pk, 0.8)


def store(
    study: Study, pairs: list[ContrastPairSpec], seed: int = 0, low: float = 0.75
) -> ContrastSet:
    return contrast_set_store(
        study=study,
        seed=seed,
        low=low,
        high=0.9,
        best=ContrastSet.Best.FIRST_RANKED,
        system=None,
        backbone="all-MiniLM-L6-v2",
        pairs=pairs,
    ).contrast_set


def test_the_contrast_strategy_shows_each_prompt_of_a_pair_with_both_best_answers(
    cast: Cast,
) -> None:
    rows = make_prompts(cast.study, 4)
    contrast_set = store(cast.study, [spec(rows[0], rows[1]), spec(rows[3], rows[2])])

    result = pairs_generate(study=cast.study, strategy="contrast", seed=0)

    assert result.created == 4
    items = Pair.objects.filter(study=cast.study, source=Pair.Source.CONTRAST)
    shown = {(item.prompt_id, item.answer_a_id, item.answer_b_id, item.turn) for item in items}
    expected = set()
    for contrast in contrast_set.pairs.all():
        a, b = sorted((contrast.answer_a_id, contrast.answer_b_id))
        expected |= {(contrast.prompt_a_id, a, b, 1), (contrast.prompt_b_id, a, b, 1)}
    assert shown == expected
    assert all(item.contrast_id is not None and not item.is_gold for item in items)
    # Stored in canonical prompt order whichever way it was handed in.
    assert {(c.prompt_a_id, c.prompt_b_id) for c in contrast_set.pairs.all()} == {
        (rows[0][0].pk, rows[1][0].pk),
        (rows[2][0].pk, rows[3][0].pk),
    }


def test_running_the_contrast_strategy_again_creates_nothing_new(cast: Cast) -> None:
    rows = make_prompts(cast.study, 2)
    store(cast.study, [spec(rows[0], rows[1])])
    pairs_generate(study=cast.study, strategy="contrast")
    again = pairs_generate(study=cast.study, strategy="contrast")
    assert (again.created, again.already_present) == (0, 2)


def test_the_contrast_strategy_without_a_stored_set_says_how_to_build_one(cast: Cast) -> None:
    with pytest.raises(
        PairsGenerationError, match="no contrast set for seed 3.*build_contrast_set"
    ):
        pairs_generate(study=cast.study, strategy="contrast", seed=3)


def test_contrast_items_do_not_disturb_regular_pairs_and_count_towards_the_gold_share(
    cast: Cast,
) -> None:
    rows = make_prompts(cast.study, 2)
    store(cast.study, [spec(rows[0], rows[1])])
    pairs_generate(study=cast.study, strategy="contrast")
    assert pairs_generate(study=cast.study, strategy="all").created == 2
    Study.objects.filter(pk=cast.study.pk).update(gold_share=Decimal("0.5"))
    cast.study.refresh_from_db()
    # 2 regular + 2 contrast items: gold share 0.5 wants 4 gold pairs, and 2 ranked prompts give 2.
    assert gold_pairs_generate(study=cast.study).marked_gold == 2
    assert Pair.objects.filter(study=cast.study, source=Pair.Source.CONTRAST).count() == 2


@pytest.mark.parametrize(
    ("make_bad", "message"),
    [
        (lambda rows, other: spec(rows[0], other[0]), "is not in main-study"),
        (
            lambda rows, other: ContrastPairSpec(
                rows[0][0].pk, rows[1][0].pk, rows[1][1].pk, rows[0][1].pk, 0.8
            ),
            "is not an answer to prompt",
        ),
        (
            lambda rows, other: ContrastPairSpec(
                rows[0][0].pk, rows[1][0].pk, rows[0][1].pk, rows[1][1].pk, 0.95
            ),
            r"cosine 0.950 lies outside the window \[0.75, 0.9\]",
        ),
        (
            lambda rows, other: ContrastPairSpec(
                rows[0][0].pk, rows[0][0].pk, rows[0][1].pk, rows[0][2].pk, 0.8
            ),
            "cannot be contrasted with itself",
        ),
    ],
)
def test_a_bad_contrast_pair_is_named_and_nothing_is_stored(
    cast: Cast, make_bad: object, message: str
) -> None:
    rows = make_prompts(cast.study, 4)
    other = make_prompts(cast.other_study, 1)
    good = spec(rows[2], rows[3])
    bad = make_bad(rows, other)  # type: ignore[operator]
    with pytest.raises(ContrastSetError, match=f"contrast pair 2 .*{message}"):
        store(cast.study, [good, bad])
    assert not ContrastSet.objects.exists()


def test_a_prompt_in_two_pairs_of_one_set_is_refused(cast: Cast) -> None:
    rows = make_prompts(cast.study, 3)
    with pytest.raises(ContrastSetError, match="already in contrast pair 1"):
        store(cast.study, [spec(rows[0], rows[1]), spec(rows[1], rows[2])])


def test_the_same_set_again_is_kept_and_a_different_one_for_the_seed_is_refused(
    cast: Cast,
) -> None:
    rows = make_prompts(cast.study, 3)
    first = store(cast.study, [spec(rows[0], rows[1])])
    assert store(cast.study, [spec(rows[0], rows[1])]).pk == first.pk
    with pytest.raises(ContrastSetError, match="already has a contrast set for seed 0"):
        store(cast.study, [spec(rows[0], rows[2])])
    assert store(cast.study, [spec(rows[0], rows[2])], seed=1).seed == 1


def test_the_database_refuses_a_contrast_item_without_its_pair_and_a_regular_pair_with_one(
    cast: Cast,
) -> None:
    rows = make_prompts(cast.study, 2)
    contrast = store(cast.study, [spec(rows[0], rows[1])]).pairs.get()
    a, b = sorted((rows[0][1].pk, rows[1][1].pk))
    for fields in (
        {"source": Pair.Source.CONTRAST},
        {"source": Pair.Source.ALL_PAIRS, "contrast": contrast},
        {"source": Pair.Source.CONTRAST, "contrast": contrast, "turn": 2},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Pair.objects.create(
                study=cast.study, prompt=rows[0][0], answer_a_id=a, answer_b_id=b, **fields
            )


def test_a_worker_page_shows_no_trace_of_a_contrast_item(cast: Cast) -> None:
    study = cast.study
    study.target_per_worker = 2
    study.save()
    rows = make_prompts(study, 2)
    store(study, [spec(rows[0], rows[1])])
    pairs_generate(study=study, strategy="contrast")
    items = Pair.objects.filter(study=study, source=Pair.Source.CONTRAST)
    assert items.count() == 2

    me = Client()
    enter_and_consent(me, study, "PID-CRAWL")
    base = f"/work/{study.slug}"
    pages = []
    shown_questions = set()
    for _ in range(2):
        location = me.get(f"{base}/")["Location"]
        page = me.get(location)
        pages.append(page)
        body = page.content.decode()
        shown_questions |= {q for q in ("Question 0?", "Question 1?") if q in body}
        # Both best answers are on the page: the item's own and the other prompt's.
        assert "best 0" in body and "best 1" in body
        me.post(location, data={"submission_id": str(uuid.uuid4()), "likert": "2"})
    pages.append(me.get(f"{base}/", follow=True))
    pages.append(me.post(f"{base}/api/next/"))
    pages.append(me.get(f"{base}/api/progress/"))

    assert shown_questions == {"Question 0?", "Question 1?"}
    for page in pages:
        text = "\n".join([page.content.decode(), *(f"{k}: {v}" for k, v in page.items())]).lower()
        assert "contrast" not in text
        assert SECRET_SYSTEM.lower() not in text
        for item in items:
            # No database id of an item, its contrast pair or its answers either.
            assert f"/{item.pk}/" not in text


def test_a_researcher_makes_contrast_items_from_the_pairs_page_or_learns_how_to_build_a_set(
    cast: Cast,
) -> None:
    client = Client()
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = f"/studies/{cast.study.slug}/pairs/"
    form = {"strategy": "contrast", "turns": "all", "seed": 5}

    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    clicked = client.post(page, form)
    assert pairs_generation_run(study_id=cast.study.pk)  # as the worker does
    refused = client.get(clicked["Location"]).content.decode()
    assert "no contrast set for seed 5" in refused and "build_contrast_set" in refused
    assert not Pair.objects.exists()

    rows = make_prompts(cast.study, 2)
    store(cast.study, [spec(rows[0], rows[1])], seed=5)
    client.post(page, form)
    assert pairs_generation_run(study_id=cast.study.pk)
    broker_purge(settings.CELERY_BROKER_URL, Queue.DEFAULT.value)
    assert Pair.objects.filter(study=cast.study, source=Pair.Source.CONTRAST).count() == 2
