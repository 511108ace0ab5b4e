"""A whole study run from the browser, as a researcher and a worker would, in Debian's Chromium.

The researcher starts from an empty study: imports a file, reviews a leak flag, configures forms,
gold, pay and the Prolific fields, generates pairs, previews an item, launches; a worker comes in
through the entry link, finishes and gets the full completion code. Then the researcher connects
an LLM judge with a pasted key to the local fake OpenAI server, tests the connection, runs it on
a real Celery worker and downloads every export format. The only stand-in is the LLM API.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.core.cache import cache
from playwright.sync_api import Browser, Page

from annotation.models import Assignment, HumanJudgment, Study, Worker
from annotation.roles import Role
from annotation.services.pairs_jobs import pairs_generation_run
from judges.models import Judge, JudgeCall, JudgeRun
from tests.browser import chromium
from tests.conftest import PASSWORD, make_user
from tests.judges.fake_openai import API_KEY, FakeOpenAI
from tests.judges.integration import broker_purge, worker_start

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SYSTEMS = ("atlas", "borealis", "cirrus")
LEAKY = "As an AI language model developed by OpenAI, I suggest a short walk."


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
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def study_file(tmp_path: Path) -> Path:
    """Four prompts answered by three systems with ranks (for gold), one answer naming its maker."""
    lines: list[dict[str, Any]] = [
        {"type": "system", "name": name, "version": "1"} for name in SYSTEMS
    ]
    for n in range(4):
        answers = []
        for rank, name in enumerate(SYSTEMS, start=1):
            text = f"Answer {n} by the rank-{rank} system."
            if n == 0 and name == "cirrus":
                text = LEAKY
            answers.append({"system": name, "version": "1", "text": text, "rank": rank})
        lines.append(
            {
                "type": "prompt",
                "id": f"e2e-{n}",
                "category": "advice" if n % 2 else "coding",
                "turns": [f"How do I handle problem number {n}?"],
                "answers": answers,
            }
        )
    path = tmp_path / "study.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def fill_settings(page: Page, values: dict[str, str], checks: dict[str, bool]) -> None:
    for name, value in values.items():
        page.fill(f"#id_{name}", value)
    for name, on in checks.items():
        page.set_checked(f"#id_{name}", on)


def rate_items_until_done(page: Page) -> int:
    """Rate each item the way a careful worker would: gold pairs on their known better side."""
    rated = 0
    while page.query_selector("#judgment-form"):
        public_id = page.get_attribute("#judgment-form", "data-item")
        assert public_id is not None
        assignment = Assignment.objects.select_related("pair").get(public_id=public_id)
        pair = assignment.pair
        a_better = pair.gold_side != "B"  # gold side for gold pairs; A otherwise
        left_better = a_better == assignment.a_left
        page.click(f"label[for='likert-{2 if left_better else 7}']")
        page.click("label[for='value-clarity']")
        with page.expect_navigation():
            page.click("#submit")
        rated += 1
        assert rated <= 10, "the study should have ended by now"
    return rated


def test_a_researcher_runs_a_whole_paid_study_and_a_judge_from_the_browser(
    browser: Browser, live_server: Any, fake: FakeOpenAI, tmp_path: Path
) -> None:
    make_user("rita-researcher", Role.RESEARCHER)
    base = live_server.url
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)

    # Log in and create an empty study.
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", "rita-researcher")
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.click("button[type='submit'], input[type='submit']")
    page.click("#new-study")
    page.fill("#id_name", "Everyday advice, paid")
    with page.expect_navigation():
        page.click("#study-create button[type='submit']")
    study = Study.objects.get(name="Everyday advice, paid")
    assert study.status == Study.Status.DRAFT and not study.prompts.exists()
    slug = study.slug

    # Import a file; the answer that names its maker is flagged, then reviewed and cleared.
    page.goto(f"{base}/studies/{slug}/import/")
    page.set_input_files("input[type='file']", str(study_file(tmp_path)))
    with page.expect_navigation():
        page.click("button:has-text('Upload')")
    assert page.inner_text("#flagged-count") == "1"
    page.goto(f"{base}/studies/{slug}/flagged/")
    with page.expect_navigation():
        page.click("button:has-text('Clear')")

    # Configure forms, gold, pay and the Prolific fields; a bad gold minimum is refused first.
    page.goto(f"{base}/studies/{slug}/settings/")
    page.fill("#id_instructions", "Compare the two answers **carefully**.")
    page.click("#preview-instructions")
    assert "<strong>carefully</strong>" in page.inner_html("#instructions-preview")
    values = {
        "overlap": "1",
        "target_per_worker": "4",
        "expected_seconds_per_judgment": "30",
        "gold_share": "0.25",
        "gold_warn_accuracy": "0.8",
        "gold_block_accuracy": "0.5",
        "gold_min_items": "3",
        "pay_per_judgment_cents": "20",
        "hourly_floor_cents": "1200",
        "prolific_study_id": "65f0e2e0aaaabbbbccccdddd",
        "completion_code": "E2E-FULL",
        "partial_completion_code": "E2E-PART",
    }
    checks = {"form_likert": True, "form_values": True, "values_required": True}
    fill_settings(page, values, checks)
    page.click("#save-settings")
    assert "about 1.0 gold pairs in 4 judgments" in page.inner_text("#error-gold_min_items")
    page.fill("#id_gold_min_items", "1")
    with page.expect_navigation():
        page.click("#save-settings")
    study.refresh_from_db()
    assert (study.target_per_worker, study.gold_min_items, study.completion_code) == (
        4,
        1,
        "E2E-FULL",
    )

    # Generate every system pair and gold pairs from the ranks.
    page.goto(f"{base}/studies/{slug}/pairs/")
    page.select_option("#id_strategy", "all")
    page.select_option("#id_gold", "first_vs_last")
    with page.expect_navigation():
        page.click("button:has-text('Generate')")
    assert pairs_generation_run(study_id=study.pk)  # the queued task, as a worker runs it
    broker_purge(settings.CELERY_BROKER_URL, "default")
    assert study.pairs.count() == 12 and study.pairs.filter(is_gold=True).exists()

    # The checklist asks for a preview; the preview shows an item and counts nothing.
    page.goto(f"{base}/studies/{slug}/checklist/")
    assert "to do" in page.inner_text("#check-preview")
    assert page.inner_text("#check-data").count("4 prompts, 12 answers from 3 systems") == 1
    page.click("#check-preview a")
    page.wait_for_selector("#preview-banner")
    assert "atlas" not in page.inner_text("main")  # blind, as workers see it
    page.click("label[for='likert-3']")
    page.click("label[for='value-relevance']")
    with page.expect_navigation():
        page.click("#submit")
    page.wait_for_selector("#preview-accepted")
    assert not Assignment.objects.exists() and not HumanJudgment.objects.exists()

    # Launch, and read the entry link to paste into Prolific.
    page.goto(f"{base}/studies/{slug}/checklist/")
    for key in ("data", "pairs", "leaks", "preview", "pay", "prolific"):
        assert "done" in page.inner_text(f"#check-{key} .state"), key
    with page.expect_navigation():
        page.click("#launch")
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE
    entry = page.input_value("#entry-link")
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in entry

    # A worker arrives as Prolific would send them, consents, rates and gets the full code.
    link = (
        entry.replace("{{%PROLIFIC_PID%}}", "E2EWORKER01")
        .replace("{{%STUDY_ID%}}", study.prolific_study_id)
        .replace("{{%SESSION_ID%}}", "E2ESESSION01")
    )
    worker_context = browser.new_context(viewport={"width": 1280, "height": 900})
    worker_page = worker_context.new_page()
    worker_page.set_default_timeout(20_000)
    worker_page.goto(link)
    worker_page.check("#agree")
    with worker_page.expect_navigation():
        worker_page.click("#start")
    assert rate_items_until_done(worker_page) == 4
    assert worker_page.inner_text("#completion-code") == "E2E-FULL"
    assert "cc=E2E-FULL" in (worker_page.get_attribute("#completion-link", "href") or "")
    worker_context.close()
    worker = Worker.objects.get(external_id="E2EWORKER01")
    assert worker.state == Worker.State.DONE and worker.judgments.count() == 4

    # Connect an LLM judge with a pasted key, test it, and run it on a real Celery worker.
    page.goto(f"{base}/studies/{slug}/judges/")
    page.click("#connect-judge")
    page.fill("#id_name", "gpt-e2e")
    page.select_option("#id_template", "likert")
    page.fill("#id_model_name", "gpt-4-fake")
    page.fill("#id_base_url", fake.base_url)
    page.check("input[name='key_source'][value='paste']")
    page.fill("#id_api_key", API_KEY)
    page.fill("#id_price_input_per_mtok", "10")
    page.fill("#id_price_output_per_mtok", "30")
    with page.expect_navigation():
        page.click("#create-judge")
    judge = Judge.objects.get(name="gpt-e2e")
    assert API_KEY not in page.content()

    for queue in ("default", "llm_judge", "analysis"):
        broker_purge(settings.CELERY_BROKER_URL, queue)
    # One real worker for the connection test, the judge's calls and the analysis report.
    celery = worker_start(tmp_path, "e2e-worker", queues="default,llm_judge,analysis")
    try:
        # The test is made by the worker; the page polls its answer and shows it in place.
        with page.expect_navigation():
            page.click("#test-connection")
        page.wait_for_selector("#connection-test[data-state='done']", timeout=30_000)
        assert "Connection works: gpt-4-fake" in page.inner_text("#connection-test")
        page.goto(f"{base}/studies/{slug}/judges/")
        page.select_option("#id_judge", str(judge.pk))
        with page.expect_navigation():
            page.click("button:has-text('Start')")
        run = JudgeRun.objects.get(judge=judge)
        # The page polls, and reloads once when the run is over.
        page.wait_for_selector("#progress[data-status='done']", timeout=90_000)
        # Once over, the page asks for progress no more.
        polls: list[str] = []
        page.on(
            "request",
            lambda request: polls.append(request.url) if "progress" in request.url else None,
        )
        page.wait_for_timeout(5_000)  # more than two of its 2-second polling intervals
        assert polls == []
        run.refresh_from_db()
        assert run.status == JudgeRun.Status.DONE
        assert set(run.calls.values_list("status", flat=True)) == {JudgeCall.Status.DONE}
        assert run.calls.count() == 24  # 12 pairs in both orders
        calls_table = page.inner_text("#calls")
        assert "atlas 1" in calls_table and "borealis 1" in calls_table

        # Download every export format, and check each one reads back.
        # The analysis worker computes the report; the page reloads itself until it is there.
        page.goto(f"{base}/studies/{slug}/analysis/")
        page.wait_for_selector("a[download][href*='report.json']", timeout=240_000)
        # Read with selectors, not evaluated script: the pages' CSP allows no eval.
        anchors = page.query_selector_all(
            "a[download][href*='/analysis/exports/'], a[download][href*='report.json']"
        )
        links = [anchor.get_attribute("href") or "" for anchor in anchors]
        formats = {href.rsplit(".", 1)[-1].split("?")[0] for href in links}
        assert formats == {"csv", "jsonl", "parquet", "json"}, links
        for href in links:
            with page.expect_download(timeout=60_000) as download_info:
                page.click(f"a[href='{href}']")
            data = Path(download_info.value.path()).read_bytes()
            assert data, href
            suffix = href.rsplit(".", 1)[-1].split("?")[0]
            if suffix == "parquet":
                assert pq.read_table(io.BytesIO(data)).num_rows > 0, href
            elif suffix == "jsonl":
                rows = [json.loads(line) for line in data.decode().splitlines()]
                assert rows, href
            elif suffix == "json":
                assert isinstance(json.loads(data), dict)
            else:
                assert data.decode().count("\n") >= 2, href
            assert API_KEY.encode() not in data and judge.api_key_encrypted.encode() not in data
    finally:
        celery.stop()
    context.close()
