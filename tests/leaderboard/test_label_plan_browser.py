"""The label budget planner in Debian's Chromium: from the analysis page's link, the researcher
asks for a target half width and reads "N more judgments, about $X" with the projection plot, on
the planner tests' study (12 prompts, two workers, a judge that always says A)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from playwright.sync_api import Browser

from annotation.models import Study
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast
from tests.leaderboard.conftest import analysis_worker_run
from tests.leaderboard.test_label_plan import JUDGE, _budget, _by_hand, planned_study  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def test_a_researcher_plans_the_labels_a_target_needs_in_the_browser(
    browser: Browser,
    live_server: Any,
    cast: Cast,
    planned_study: Study,  # noqa: F811
) -> None:
    budget, human_votes = _budget(planned_study)
    more = _by_hand(budget, human_votes, target=0.18, prompts=12)
    base = live_server.url
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", cast.researcher.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{base}/studies/{planned_study.slug}/analysis/")
    # The page queued the report; the analysis worker's job computes it.
    analysis_worker_run()
    page.reload()
    page.click(f'a[href="/studies/{planned_study.slug}/analysis/planner/"]')
    page.wait_for_selector("#plan-form")
    assert page.locator("#plan-answer").count() == 0
    assert page.locator("svg").count() >= 1  # the projection plot
    page.select_option("#id_judge", JUDGE)
    page.fill("#id_target_points", "18")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("#plan-answer")
    answer = page.locator("#plan-answer").inner_text()
    assert f"{more} more judgments, about ${more * 25 / 100:,.2f} at 25¢ per judgment" in answer
    # A target below the field's minimum is refused by the browser before any request.
    page.fill("#id_target_points", "0.01")
    assert page.locator("#id_target_points").evaluate("field => field.validity.valid") is False
    page.close()
