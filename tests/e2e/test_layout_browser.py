"""At 1280 px, the width of a common laptop, no researcher page's main content runs off the
screen: no page scrolls sideways, no table hides columns behind a scroll, no button is cut off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from annotation.models import Study
from annotation.services.roles import study_member_add
from tests.annotation.work_helpers import make_pairs, make_worker, submit
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast
from tests.factories import make_assignment
from tests.leaderboard.conftest import analysis_worker_run
from tests.leaderboard.mtbench_data import mtbench_load

WIDTH = 1280

# What sticks out: the page's own width past the window, each table wider than its box, each
# control of the main content past the window's right edge.
OVERFLOW = """() => {
  const out = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth) out.push(`page ${doc.scrollWidth}px wide`);
  const main = document.querySelector("main") || document.body;
  for (const wrap of main.querySelectorAll(".table-wrap")) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) {
      const table = wrap.querySelector("table");
      const name = table ? table.dataset.table || table.id : "?";
      out.push(`table ${name} ${wrap.scrollWidth}px in ${wrap.clientWidth}px`);
    }
  }
  for (const el of main.querySelectorAll("button, input, select, textarea, a.button")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > window.innerWidth + 1) {
      const name = el.id || el.name || el.textContent.trim().slice(0, 20);
      out.push(`${el.tagName.toLowerCase()}#${name} ends at ${Math.round(box.right)}px`);
    }
  }
  return out;
}"""


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def log_in(page: Page, base: str, cast: Cast) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", cast.researcher.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()


@pytest.mark.browser
def test_no_researcher_page_overflows_at_1280_pixels(
    transactional_db: None, live_server: object, cast: Cast, browser: Browser
) -> None:
    mtbench_load("mt-bench", 1)
    study_member_add(study=Study.objects.get(slug="mt-bench"), user=cast.researcher)
    make_pairs(cast.study, 3)
    for i in range(4):
        worker = make_worker(cast.study, f"worker-with-a-long-participant-id-{i:024d}")
        for pair in cast.study.pairs.all()[:2]:
            submit(make_assignment(pair, worker))
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    base = str(live_server)
    log_in(page, base, cast)
    page.goto(f"{base}/studies/mt-bench/analysis/")
    analysis_worker_run()
    pages = [
        "/studies/",
        "/studies/mt-bench/",
        "/studies/mt-bench/analysis/",
        "/studies/mt-bench/analysis/planner/",
        "/studies/mt-bench/analysis/units/",
        "/studies/mt-bench/judges/",
        "/studies/mt-bench/pairs/",
        f"/studies/{cast.study.slug}/",
        f"/studies/{cast.study.slug}/workers/",
        f"/studies/{cast.study.slug}/settings/",
        f"/studies/{cast.study.slug}/checklist/",
        f"/studies/{cast.study.slug}/import/",
    ]
    found = {}
    for path in pages:
        page.goto(base + path)
        page.wait_for_load_state()
        assert page.locator("#report-progress").count() == 0, path
        problems = page.evaluate(OVERFLOW)
        if problems:
            found[path] = problems
    page.close()
    assert found == {}
