"""A researcher switches a study to active pair selection from its settings page, in Debian's
Chromium: a uniform share of 0 is refused by its field, 0.35 is saved."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from playwright.sync_api import Browser

from annotation.models import Study
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast

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


def test_a_researcher_switches_a_study_to_active_selection_in_the_browser(
    browser: Browser, live_server: Any, cast: Cast
) -> None:
    base = live_server.url
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", cast.researcher.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{base}/studies/{cast.study.slug}/settings/")
    fieldset = page.locator("fieldset", has_text="Pair selection")
    assert fieldset.locator("#id_selection").input_value() == "uniform"
    assert fieldset.locator("#id_uniform_share").input_value() == "0.200"
    # The shared cast's gold minimum (3) is more than its sessions show; the page refuses it.
    page.fill("#id_gold_min_items", "2")
    page.select_option("#id_selection", "active")
    page.fill("#id_uniform_share", "0")
    page.click("#save-settings")
    assert page.locator("#error-uniform_share").is_visible()
    assert "must be above 0" in page.locator("#error-uniform_share").inner_text()
    assert Study.objects.get(pk=cast.study.pk).selection == "uniform"
    page.fill("#id_uniform_share", "0.35")
    page.click("#save-settings")
    page.wait_for_url(f"{base}/studies/{cast.study.slug}/settings/")
    assert page.locator("#error-uniform_share").count() == 0
    assert page.locator("#id_selection").input_value() == "active"
    study = Study.objects.get(pk=cast.study.pk)
    assert (study.selection, study.uniform_share) == ("active", Decimal("0.350"))
    page.close()
