"""A researcher opens the MT-Bench study's analysis page in a real headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from annotation.models import Study
from annotation.services.roles import study_member_add
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast
from tests.leaderboard.conftest import analysis_worker_run
from tests.leaderboard.mtbench_data import mtbench_load

GPT4 = "gpt-4 pair, imported vs human"


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def row_cells(page: Page, comparison: str, level: str = "vote") -> list[str]:
    rows = page.locator('table[data-table="agreement"] tbody tr')
    for i in range(rows.count()):
        cells = [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
        if cells[:2] == [comparison, level]:
            return cells[2:]
    raise AssertionError(f"no agreement row for {comparison} ({level})")


def until_report(page: Page) -> None:
    """The page first says the report is being computed; the analysis worker's job runs, and
    the page, reloading itself, shows the report and stops reloading."""
    page.wait_for_selector("#report-progress")
    assert analysis_worker_run() == 1
    page.wait_for_selector('table[data-table="agreement"]', timeout=15_000)
    assert page.locator('meta[http-equiv="refresh"]').count() == 0


@pytest.mark.browser
def test_researcher_finds_table_2_on_the_mtbench_dashboard(
    transactional_db: None, live_server: object, cast: Cast, browser: Browser
) -> None:
    mtbench_load("mt-bench")
    study_member_add(study=Study.objects.get(slug="mt-bench"), user=cast.researcher)
    page = browser.new_page()
    page.goto(f"{live_server}/accounts/login/?next=/studies/mt-bench/analysis/")
    page.fill("input[name=username]", cast.researcher.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Analysis: MT-Bench human judgments')")
    until_report(page)

    # Table 2 of Zheng et al. 2023: rate with ties, agree, total; rate without ties, agree, total.
    expected = {
        "1": {
            GPT4: ["66%", "886", "1343", "85%", "727", "859"],
            "human vs human": ["63%", "454", "721", "81%", "388", "479"],
        },
        "2": {
            GPT4: ["66%", "871", "1325", "85%", "731", "864"],
            "human vs human": ["67%", "471", "707", "82%", "388", "474"],
        },
    }
    for turn, rows in expected.items():
        page.select_option("select[name=turn]", turn)
        page.click("#filters button[type=submit]")
        page.wait_for_url(f"**turn={turn}**")
        until_report(page)
        for comparison, cells in rows.items():
            assert row_cells(page, comparison) == cells
        # The per-category bar chart is drawn inline and can be downloaded.
        assert page.locator("#plot-category-correlation svg rect").count() > 8
        with page.expect_download() as download:
            page.click("#table-agreement a:has-text('Download CSV')")
        assert download.value.suggested_filename == "mt-bench-agreement.csv"
    page.close()
