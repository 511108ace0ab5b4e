"""Bonuses paid through Prolific's API: set up, then paid at most once per batch, whatever
fails in between; against the local fake of the API (fake_prolific.py) over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotation.models import ProlificBonusBatch, Study
from annotation.prolific import ProlificClient
from annotation.selectors.bonus import study_bonus_lines
from annotation.services.prolific import prolific_token_set
from annotation.services.prolific_bonus import (
    BonusBatchRefused,
    bonus_batch_create,
    bonus_batch_run,
    bonus_batch_settle,
)
from tests.annotation.fake_prolific import TOKEN, FakeProlific, Fault
from tests.annotation.test_bonus import ledger
from tests.conftest import Cast

Status = ProlificBonusBatch.Status
PROLIFIC_STUDY = "STUDY1"


@pytest.fixture
def fake(settings) -> Iterator[FakeProlific]:
    server = FakeProlific().start()
    settings.PROLIFIC_API_BASE = server.base_url
    settings.PROLIFIC_API_TIMEOUT_SECONDS = 1.0
    server.study_add(study_id=PROLIFIC_STUDY)
    yield server
    server.stop()


@pytest.fixture
def study(cast: Cast, fake: FakeProlific) -> Study:
    """The issue's ledger: 8 judgments x 20c paid by the $1.60 reward, a 50c gold bonus; and a
    second participant on a returned submission, owed their $0.60 of judgments as bonus."""
    Study.objects.filter(pk=cast.study.pk).update(
        target_per_worker=8, pay_per_judgment_cents=20, prolific_study_id=PROLIFIC_STUDY
    )
    cast.study.refresh_from_db()
    prolific_token_set(study=cast.study, token=TOKEN)
    ledger(cast.worker_one, judgments=8, each=20, gold=50)
    ledger(cast.worker_two, judgments=3, each=20)
    cast.worker_two.state = "returned"
    cast.worker_two.save(update_fields=["state"])
    for worker in (cast.worker_one, cast.worker_two):
        fake.submission_add(study_id=PROLIFIC_STUDY, participant_id=worker.external_id)
    return cast.study


def pays(fake: FakeProlific) -> int:
    return len(fake.calls("POST", "/api/v1/bulk-bonus-payments/"))


def due(study: Study) -> dict[str, int]:
    return {line.external_id: line.arithmetic.due_cents for line in study_bonus_lines(study=study)}


def test_a_batch_is_set_up_with_the_bonus_due_then_paid_once(
    study: Study, fake: FakeProlific, cast: Cast
) -> None:
    batch = bonus_batch_create(study=study, user=cast.researcher)
    assert batch.total_cents == 110
    assert bonus_batch_run(batch_id=batch.pk) == Status.PAID
    (setup,) = fake.calls("POST", "/api/v1/submissions/bonus-payments/")
    assert setup.body == {
        "study_id": PROLIFIC_STUDY,
        "csv_bonuses": "PID-walt-worker,0.60\nPID-wendy-worker,0.50",
    }
    assert setup.authorization == f"Token {TOKEN}"
    batch.refresh_from_db()
    assert fake.paid == {batch.prolific_batch_id: 1}
    # Running it again, or the periodic run, pays nothing more; nothing is due any more.
    assert bonus_batch_run(batch_id=batch.pk) == Status.PAID
    assert pays(fake) == 1
    assert due(study) == {"PID-walt-worker": 0, "PID-wendy-worker": 0}
    with pytest.raises(BonusBatchRefused):
        bonus_batch_create(study=study, user=cast.researcher)


def test_killed_between_setup_and_recording_it_sets_up_again_and_pays_once(
    study: Study, fake: FakeProlific, cast: Cast
) -> None:
    batch = bonus_batch_create(study=study, user=cast.researcher)
    # A run claimed the set-up and made the call, then died before recording Prolific's id.
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(
        status=Status.CREATING, lease_until=timezone.now() + timedelta(seconds=60)
    )
    ProlificClient(token=TOKEN).bonus_setup(
        study_id=PROLIFIC_STUDY, csv_bonuses="PID-wendy-worker,0.50"
    )
    assert bonus_batch_run(batch_id=batch.pk) == Status.CREATING  # the lease still holds
    assert pays(fake) == 0
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(lease_until=timezone.now())
    assert bonus_batch_run(batch_id=batch.pk) == Status.PAID
    batch.refresh_from_db()
    assert len(fake.bonus_batches) == 2  # the orphan set-up is never paid
    assert fake.paid == {batch.prolific_batch_id: 1}


def test_killed_between_pay_and_recording_it_is_possibly_paid_and_never_paid_again(
    study: Study, fake: FakeProlific, cast: Cast
) -> None:
    batch = bonus_batch_create(study=study, user=cast.researcher)
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(
        status=Status.CREATED, prolific_batch_id=""
    )
    prolific_id = ProlificClient(token=TOKEN).bonus_setup(
        study_id=PROLIFIC_STUDY, csv_bonuses="PID-wendy-worker,0.50"
    )
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(prolific_batch_id=prolific_id)
    # A run claimed the pay, called it, and died before recording the outcome.
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(
        status=Status.PAYING, lease_until=timezone.now() - timedelta(seconds=1)
    )
    ProlificClient(token=TOKEN).bonus_pay(prolific_id)
    assert bonus_batch_run(batch_id=batch.pk) == Status.UNCERTAIN
    assert bonus_batch_run(batch_id=batch.pk) == Status.UNCERTAIN
    assert fake.paid == {prolific_id: 1}
    assert due(study)["PID-wendy-worker"] == 0  # possibly paid counts as sent


@pytest.mark.parametrize("kind", ["500", "503", "timeout", "drop"])
def test_a_pay_call_that_fails_unclearly_is_possibly_paid_and_not_retried(
    study: Study, fake: FakeProlific, cast: Cast, kind: str
) -> None:
    batch = bonus_batch_create(study=study, user=cast.researcher)
    fake.inject(Fault(kind=kind, path="/api/v1/bulk-bonus-payments/", seconds=1.5))
    assert bonus_batch_run(batch_id=batch.pk) == Status.UNCERTAIN
    assert bonus_batch_run(batch_id=batch.pk) == Status.UNCERTAIN
    assert pays(fake) == 1


def test_a_setup_outage_pays_nothing_and_is_tried_again(
    study: Study, fake: FakeProlific, cast: Cast
) -> None:
    batch = bonus_batch_create(study=study, user=cast.researcher)
    fake.inject(Fault(kind="503", path="/api/v1/submissions/bonus-payments/"))
    assert bonus_batch_run(batch_id=batch.pk) == Status.PENDING
    assert pays(fake) == 0
    assert bonus_batch_run(batch_id=batch.pk) == Status.PAID
    assert pays(fake) == 1


def test_the_page_says_possibly_paid_and_the_researcher_settles_it(
    study: Study, fake: FakeProlific, cast: Cast
) -> None:
    client = Client()
    client.force_login(cast.researcher)
    fake.inject(Fault(kind="500", path="/api/v1/bulk-bonus-payments/"))
    response = client.post(f"/studies/{study.slug}/workers/bonus-batch/", follow=True)
    assert b"queued" in response.content
    batch = ProlificBonusBatch.objects.get(study=study)
    bonus_batch_run(batch_id=batch.pk)
    page = client.get(f"/studies/{study.slug}/workers/").content.decode()
    assert "possibly paid: check Prolific" in page and "will not pay it again" in page
    client.post(f"/studies/{study.slug}/workers/bonus-batch/{batch.pk}/settle/", {"paid": "no"})
    batch.refresh_from_db()
    assert batch.status == Status.FAILED
    assert due(study) == {"PID-walt-worker": 60, "PID-wendy-worker": 50}  # owed again
    bonus_batch_settle(batch=batch, paid=True)  # only an uncertain batch is settled
    batch.refresh_from_db()
    assert batch.status == Status.FAILED
