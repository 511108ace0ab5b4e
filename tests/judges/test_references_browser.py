"""Writing reference answers in Debian's Chromium: from the judge's page to the references page,
a click queues the job, a worker writes the references, and the waiting page shows the outcome
by itself (its poll), then the ledger on reload."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from playwright.sync_api import Browser

from annotation.models import Prompt
from core.queues import Queue
from judges.tasks import references_write
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast
from tests.judges.conftest import make_llm_judge
from tests.judges.fake_openai import FakeOpenAI
from tests.judges.integration import broker_purge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def test_a_researcher_has_references_written_and_the_page_shows_the_outcome(
    browser: Browser, live_server: Any, cast: Cast, fake: FakeOpenAI, api_key: str
) -> None:
    cache.clear()
    broker_purge(settings.CELERY_BROKER_URL, Queue.LLM_JUDGE.value)
    cast.study.reference_categories = ["math"]
    cast.study.save(update_fields=["reference_categories"])
    Prompt.objects.create(
        study=cast.study, external_id="r1", category="math", turns=["Sum (ref r1-A)?"]
    )
    judge = make_llm_judge(fake, name="ref-writer")
    base = live_server.url
    page = browser.new_page()
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", cast.researcher.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{base}/studies/{cast.study.slug}/judges/{judge.pk}/")
    page.click("#write-references")
    assert page.locator("#reference-judge").input_value() == str(judge.pk)
    assert "1 without" in page.locator("#reference-counts").inner_text()

    page.click("button#write-references")
    page.wait_for_selector("#connection-test[data-state=pending]")
    assert fake.requests() == {}
    assert references_write(cast.study.pk, judge.pk)  # the worker's turn

    page.wait_for_selector("#connection-test.ok", timeout=10_000)
    assert (
        page.locator("#connection-test")
        .inner_text()
        .startswith("1 references written by judge:ref-writer (gpt-4-fake) for math")
    )
    page.reload()
    assert (
        "1 with a reference (0 imported), 0 without"
        in page.locator("#reference-counts").inner_text()
    )
    assert "ref-writer" in page.locator("#reference-ledger").inner_text()
    assert fake.requests() == {"r1:ab": 1}
    page.close()
    broker_purge(settings.CELERY_BROKER_URL, Queue.LLM_JUDGE.value)
