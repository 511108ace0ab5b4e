"""A worker may skip an item they cannot judge: with a reason, counted, never paid, and the pair
goes to someone else (Potato and Label Studio allow the same)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.test import Client

from annotation.models import Assignment, HumanJudgment, PayEntry, Study
from annotation.selectors.quality import study_worker_quality
from tests.annotation.work_helpers import enter_and_consent, make_pairs, open_item
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
    study.overlap = 1
    study.target_per_worker = 2
    study.completion_code = "C0DE42"
    study.save()
    make_pairs(study, 2)
    return study


def skip(client: Client, study: Study, assignment: Assignment, reason: str = "cannot_judge"):
    return client.post(
        f"/work/{study.slug}/item/{assignment.public_id}/skip/",
        {"skip_reason": reason},
        follow=True,
    )


def test_the_item_page_offers_a_skip_with_its_reasons(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    page = client.get(f"/work/{study.slug}/item/{assignment.public_id}/").content.decode()
    assert f'action="/work/{study.slug}/item/{assignment.public_id}/skip/"' in page
    for value, _label in Assignment.SkipReason.choices:
        assert f'<option value="{value}">' in page


def test_a_skipped_pair_goes_to_someone_else_and_never_back_to_the_skipper(
    study: Study,
) -> None:
    first, second = Client(), Client()
    enter_and_consent(first, study, "PID1")
    skipped = open_item(first, study)
    response = skip(first, study, skipped, "language")
    assert b"goes to someone else" in response.content
    skipped.refresh_from_db()
    assert (skipped.status, skipped.skip_reason) == ("skipped", "language")
    assert skipped.skipped_at is not None
    # The skipper gets the other pair, and then there is nothing left for them.
    other = open_item(first, study)
    assert other.pair_id != skipped.pair_id
    first.post(
        f"/work/{study.slug}/item/{other.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "2"},
    )
    assert "/item/" not in first.get(f"/work/{study.slug}/").get("Location", "")
    # With overlap 1 the skipped pair's slot was freed: the next worker gets exactly it.
    enter_and_consent(second, study, "PID2")
    assert open_item(second, study).pair_id == skipped.pair_id


def test_a_skip_is_never_paid_nor_counted_toward_the_target_and_shows_on_the_workers_page(
    client: Client, cast: Cast, study: Study
) -> None:
    worker = enter_and_consent(client, study, "PID1")
    skip(client, study, open_item(client, study))
    progress = client.get(f"/work/{study.slug}/api/progress/").json()
    assert progress["done"] == 0
    assert not PayEntry.objects.filter(worker=worker).exists()
    assert not HumanJudgment.objects.filter(worker=worker).exists()
    row = next(r for r in study_worker_quality(study=study) if r.worker.pk == worker.pk)
    assert (row.judgments, row.skipped) == (0, 1)
    researcher = Client()
    researcher.force_login(cast.researcher)
    page = researcher.get(f"/studies/{study.slug}/workers/")
    assert b"(1 skipped)" in page.content


def test_a_skip_needs_a_known_reason_and_a_double_skip_is_harmless(
    client: Client, study: Study
) -> None:
    enter_and_consent(client, study, "PID1")
    assignment = open_item(client, study)
    refused = skip(client, study, assignment, reason="bored")
    assert b"Choose why you skip this item" in refused.content
    assignment.refresh_from_db()
    assert assignment.status == "reserved"
    skip(client, study, assignment)
    again = skip(client, study, assignment)  # a double click
    assert again.status_code == 200
    assert Assignment.objects.filter(status="skipped").count() == 1


def test_a_skipped_item_cannot_be_answered_and_an_answered_one_cannot_be_skipped(
    client: Client, study: Study
) -> None:
    enter_and_consent(client, study, "PID1")
    skipped = open_item(client, study)
    skip(client, study, skipped)
    late = client.post(
        f"/work/{study.slug}/item/{skipped.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "2"},
        follow=True,
    )
    assert b"You skipped this item" in late.content
    assert not HumanJudgment.objects.filter(assignment=skipped).exists()
    answered = open_item(client, study)
    client.post(
        f"/work/{study.slug}/item/{answered.public_id}/",
        {"submission_id": str(uuid.uuid4()), "likert": "2"},
    )
    response = skip(client, study, answered)
    assert b"already answered this item" in response.content
    answered.refresh_from_db()
    assert answered.status == "submitted"


def test_another_workers_item_cannot_be_skipped(study: Study) -> None:
    mine, theirs = Client(), Client()
    enter_and_consent(mine, study, "PID1")
    enter_and_consent(theirs, study, "PID2")
    their_item = open_item(theirs, study)
    response = mine.post(
        f"/work/{study.slug}/item/{their_item.public_id}/skip/", {"skip_reason": "other"}
    )
    assert response.status_code == 404
    their_item.refresh_from_db()
    assert their_item.status == "reserved"


def test_the_work_api_skips_with_the_same_rules(client: Client, study: Study) -> None:
    enter_and_consent(client, study, "PID1")
    item = client.post(f"/work/{study.slug}/api/next/").json()
    url = f"/work/{study.slug}/api/items/{item['item']['id']}/skip/"
    bad = client.post(url, {"skip_reason": ""}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "skip_reason"
    done = client.post(url, {"skip_reason": "broken"}, content_type="application/json")
    assert done.status_code == 200 and done.json() == {"skipped": True, "skip_reason": "broken"}


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_a_skip_without_its_reason_and_time(study: Study) -> None:
    worker = enter_and_consent(Client(), study, "PID1")
    pair = study.pairs.first()
    assert pair is not None
    assignment = Assignment.objects.create(
        study=study,
        pair=pair,
        worker=worker,
        a_left=True,
        reserved_at=study.created_at,
        expires_at=study.created_at.replace(year=study.created_at.year + 1),
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.filter(pk=assignment.pk).update(status="skipped")
