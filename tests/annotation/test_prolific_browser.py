"""A paid Prolific study from linking to paying its bonuses, in Debian's Chromium, against the
local fake of Prolific's API over real HTTP and a real Celery worker for the bonus batch.

The researcher pastes the token and the Prolific study id, approves a participant's submission
on Prolific from the workers page, reads the bonus arithmetic and pays the bonus due in one
batch: Prolific gets one bulk approve, one bonus set-up with the gold bonus alone (the reward
pays the judgments) and one pay call; a second click pays nothing more."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from playwright.sync_api import Browser, Page

from annotation.models import PayEntry, ProlificBonusBatch, Study, Worker
from tests.annotation.fake_prolific import TOKEN, FakeProlific, fake_serve
from tests.annotation.test_bonus import ledger
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast
from tests.judges.integration import broker_purge, wait_for, worker_start

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PROLIFIC_STUDY = "STUDY1"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeProlific]:
    yield from fake_serve(settings, study_id=PROLIFIC_STUDY)


def log_in(page: Page, base: str, cast: Cast) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", cast.researcher.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")


def test_a_researcher_links_reviews_and_pays_the_bonuses_in_the_browser(
    browser: Browser,
    live_server: Any,
    cast: Cast,
    fake: FakeProlific,
    tmp_path: Path,
    settings: Any,
) -> None:
    # 8 judgments x 20c: the session pay, and so Prolific's reward, is $1.60; a 50c gold bonus.
    Study.objects.filter(pk=cast.study.pk).update(target_per_worker=8, pay_per_judgment_cents=20)
    study = Study.objects.get(pk=cast.study.pk)
    worker = cast.worker_one
    submission = fake.submission_add(
        study_id=PROLIFIC_STUDY, participant_id=worker.external_id, status="AWAITING REVIEW"
    )
    Worker.objects.filter(pk=worker.pk).update(panel_session_id=submission["id"])
    ledger(worker, judgments=8, each=20, gold=50, status="pending")
    base = live_server.url
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, base, cast)

    # Link: token and study id; the unverified-entry warning goes once a token is stored.
    page.goto(f"{base}/studies/{study.slug}/prolific/")
    assert page.locator("#unverified-warning").is_visible()
    page.fill("#id_token", TOKEN)
    page.fill("#id_prolific_study_id", PROLIFIC_STUDY)
    page.click("#prolific-save")
    page.wait_for_selector("#linked-study")
    assert page.locator("#linked-study").inner_text() == PROLIFIC_STUDY
    assert page.locator("#unverified-warning").count() == 0
    assert TOKEN not in page.content()
    study.refresh_from_db()
    assert study.prolific_study_id == PROLIFIC_STUDY and study.prolific_token_encrypted
    assert TOKEN not in study.prolific_token_encrypted

    # Review: approve the ticked submission on Prolific; the pay here follows.
    page.goto(f"{base}/studies/{study.slug}/workers/")
    page.check(f'input[aria-label="Tick {worker.external_id}"]')
    page.click("#prolific-approve")
    page.wait_for_load_state()
    (approve,) = fake.calls("POST", "/api/v1/submissions/bulk-approve/")
    assert approve.body["submission_ids"] == [submission["id"]]
    assert fake.submissions[submission["id"]]["status"] == "APPROVED"
    assert set(PayEntry.objects.filter(worker=worker).values_list("status", flat=True)) == {
        "approved"
    }
    row = page.locator(f"#bonus-{worker.pk}")
    cells = row.locator("td").all_inner_texts()
    # Approved judgments, reward, above the reward, gold bonuses, bonus due: with the sums.
    assert cells[1:6] == [
        "8 = 160¢",
        "160¢",
        "max(0, 160 − 160) = 0¢",
        "50¢",
        "50 + 0 = 50¢",
    ], cells

    # Pay: one batch, set up then paid once by the worker; a second click pays nothing.
    broker_purge(settings.CELERY_BROKER_URL)
    celery = worker_start(
        tmp_path, "bonus", queues="default", env={"PROLIFIC_API_BASE": fake.base_url}
    )
    try:
        page.click("#bonus-batch-send")
        page.wait_for_selector("#bonus-batches")
        wait_for(
            lambda: ProlificBonusBatch.objects.filter(study=study, status="paid").exists(),
            60,
            lambda: celery.text()[-3000:],
        )
    finally:
        celery.stop()
    (setup,) = fake.calls("POST", "/api/v1/submissions/bonus-payments/")
    assert setup.body == {"study_id": PROLIFIC_STUDY, "csv_bonuses": f"{worker.external_id},0.50"}
    batch = ProlificBonusBatch.objects.get(study=study)
    assert batch.total_cents == 50 and fake.paid == {batch.prolific_batch_id: 1}
    page.reload()
    assert "\tpaid\t" in page.locator(f"#bonus-batch-{batch.pk}").inner_text()
    assert page.locator(f"#bonus-{worker.pk} td").all_inner_texts()[5].endswith("= 0¢")
    page.click("#bonus-batch-send")
    page.wait_for_load_state()
    assert len(fake.calls("POST", "/api/v1/submissions/bonus-payments/")) == 1
    assert ProlificBonusBatch.objects.filter(study=study).count() == 1
    page.close()
