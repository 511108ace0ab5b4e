"""The annotator's flow in a real headless Chromium against a live server.

Needs the system browser (`apt-get install -y chromium`); Playwright drives it, its own browser
downloads are never used.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone
from playwright.sync_api import Browser, Dialog, Page

from annotation.models import (
    Answer,
    Assignment,
    HumanJudgment,
    Pair,
    Prompt,
    Study,
    System,
    Worker,
)
from tests.annotation.work_helpers import make_pairs, prolific_url
from tests.browser import chromium

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


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def live_study(slug: str, **fields: Any) -> Study:
    values: dict[str, Any] = {
        "slug": slug,
        "name": "Which answer helps more?",
        "status": Study.Status.LIVE,
        "gold_share": Decimal(0),
        "overlap": 1,
        "target_per_worker": 6,
        "completion_code": "CHROME-OK-77",
        "instructions": "Compare the two answers **carefully**.",
        "form_comment": False,
    }
    values.update(fields)
    return Study.objects.create(**values)


def arrive_and_consent(page: Page, base_url: str, study: Study, pid: str) -> None:
    page.goto(base_url + prolific_url(study, pid))
    page.check("#agree")
    page.click("#start")
    page.wait_for_load_state()


def current_assignment(page: Page) -> Assignment:
    public_id = page.get_attribute("#judgment-form", "data-item")
    assert public_id is not None
    return Assignment.objects.get(public_id=public_id)


def test_a_prolific_worker_rates_with_mouse_and_keyboard_and_gets_the_code(
    page: Page, live_server: Any
) -> None:
    study = live_study("browser-flow", form_values=True)
    make_pairs(study, 8)
    arrive_and_consent(page, live_server.url, study, "PIDBROWSER1")

    for n in range(3):  # with the mouse
        page.wait_for_selector("#judgment-form")
        assert page.is_hidden("#values")  # asked only after a preference
        page.click("label[for='likert-2']")
        assert page.is_visible("#values")
        page.click("label[for='value-clarity']")
        page.click("label[for='value-relevance']")
        page.fill("#reason", f"Clearer steps, mouse {n}")
        page.click("#submit")
        page.wait_for_load_state()

    for n in range(3):  # with the keyboard
        page.wait_for_selector("#judgment-form")
        page.keyboard.press("7")
        assert page.is_checked("#likert-7")
        page.focus("#value-empathy")
        page.keyboard.press("Space")
        page.focus("#reason")
        page.keyboard.type(f"Warmer tone, keyboard {n}")
        page.keyboard.press("Tab")  # out of the text box: Enter then submits
        with page.expect_navigation():
            page.keyboard.press("Enter")

    page.wait_for_selector("#completion-code")
    assert page.inner_text("#completion-code") == "CHROME-OK-77"
    assert "cc=CHROME-OK-77" in (page.get_attribute("#completion-link", "href") or "")

    worker = Worker.objects.get(external_id="PIDBROWSER1")
    judgments = list(HumanJudgment.objects.filter(worker=worker).order_by("created_at"))
    assert [j.likert_shown for j in judgments] == [2, 2, 2, 7, 7, 7]
    assert [sorted(j.values) for j in judgments[:3]] == [["clarity", "relevance"]] * 3
    assert [j.values for j in judgments[3:]] == [["empathy"]] * 3
    assert judgments[5].reason == "Warmer tone, keyboard 2"
    assert worker.state == Worker.State.DONE or Worker.objects.get(pk=worker.pk).state == "done"


def test_a_second_worker_never_gets_the_pair_the_first_holds(
    browser: Browser, live_server: Any
) -> None:
    study = live_study("browser-overlap")
    make_pairs(study, 1)
    first = browser.new_context().new_page()
    second = browser.new_context().new_page()
    arrive_and_consent(first, live_server.url, study, "PIDFIRST")
    first.wait_for_selector("#judgment-form")
    arrive_and_consent(second, live_server.url, study, "PIDSECOND")
    # The only pair is held by the first worker: the second is asked to come back (issue 26's
    # completion rule), never shown the held pair, and given no code.
    second.wait_for_selector("#wait")
    assert "Come back in a few minutes" in second.inner_text("h1")
    assert "CHROME-OK-77" not in second.content()
    assert second.locator("#judgment-form").count() == 0
    first.context.close()
    second.context.close()


def test_an_expired_reservation_comes_back_to_the_pool(browser: Browser, live_server: Any) -> None:
    study = live_study("browser-expiry", time_limit_seconds=60)
    (pair,) = make_pairs(study, 1)
    slow = browser.new_context().new_page()
    arrive_and_consent(slow, live_server.url, study, "PIDSLOW")
    slow.wait_for_selector("#judgment-form")
    held = current_assignment(slow)
    Assignment.objects.filter(pk=held.pk).update(
        reserved_at=timezone.now() - timedelta(minutes=5),
        expires_at=timezone.now() - timedelta(minutes=4),
    )

    quick = browser.new_context().new_page()
    arrive_and_consent(quick, live_server.url, study, "PIDQUICK")
    quick.wait_for_selector("#judgment-form")
    assert current_assignment(quick).pair_id == pair.pk

    # The slow worker's late answer is refused with a message and is not counted.
    slow.click("label[for='likert-1']")
    slow.click("#submit")
    slow.wait_for_selector(".messages")
    assert "time for this item ran out" in slow.inner_text(".messages")
    assert not HumanJudgment.objects.filter(pair=pair).exists()
    slow.context.close()
    quick.context.close()


def test_a_worker_who_fails_the_gold_checks_is_stopped(page: Page, live_server: Any) -> None:
    study = live_study(
        "browser-gold",
        gold_share=Decimal(1),
        gold_min_items=2,
        gold_warn_accuracy=Decimal("0.8"),
        gold_block_accuracy=Decimal("0.6"),
    )
    make_pairs(study, 2, gold=4)
    arrive_and_consent(page, live_server.url, study, "PIDCARELESS")
    for _ in range(2):
        page.wait_for_selector("#judgment-form")
        assignment = current_assignment(page)
        # Gold side is A: pick the side where A is not.
        wrong = "8" if assignment.a_left else "1"
        page.click(f"label[for='likert-{wrong}']")
        page.click("#submit")
        page.wait_for_load_state()
    page.wait_for_selector("#blocked")
    assert "check questions" in page.inner_text("#blocked")
    page.goto(f"{live_server.url}/work/{study.slug}/")
    assert page.is_visible("#blocked")
    assert Worker.objects.get(external_id="PIDCARELESS").state == Worker.State.BLOCKED


HOSTILE_TURNS = (
    "<script>window.__pwned = 'script'</script>\n\n"
    '<img src="http://evil.example/onerror.png" onerror="window.__pwned = \'onerror\'">\n\n'
    "[click me](javascript:window.__pwned='link')\n\n"
    "<a href=\"javascript:window.__pwned='raw'\">raw link</a>\n\n"
    "![tracker](http://evil.example/pixel.png)\n\n"
    '<iframe src="http://evil.example/frame"></iframe>\n\n'
    "```html\n<script>window.__pwned='code'</script>\n```"
)


def test_hostile_answers_render_inert(page: Page, live_server: Any) -> None:
    study = live_study("browser-hostile")
    prompt = Prompt.objects.create(
        study=study, external_id="x1", turns=['<svg onload="window.__pwned=1">Hi</svg>']
    )
    answers = [
        Answer.objects.create(
            prompt=prompt,
            system=System.objects.create(study=study, name=f"s{i}"),
            turns=[HOSTILE_TURNS if i == 0 else "**Plain** answer."],
        )
        for i in range(2)
    ]
    Pair.objects.create(study=study, prompt=prompt, answer_a=answers[0], answer_b=answers[1])
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    dialogs: list[str] = []

    def record_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record_dialog)

    arrive_and_consent(page, live_server.url, study, "PIDHOSTILE")
    page.wait_for_selector("#judgment-form")
    page.wait_for_load_state("networkidle")
    hrefs = page.eval_on_selector_all("a", "els => els.map(e => e.getAttribute('href') || '')")
    for link_text in ("click me", "raw link"):
        locator = page.get_by_text(link_text).first
        if locator.count():
            locator.click()

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    assert not [url for url in requests if not url.startswith(live_server.url)]
    assert not [href for href in hrefs if href.lower().startswith("javascript:")]
    assert page.locator("img, iframe, svg").count() == 0
    # The hostile markup is shown as text, so the worker sees what the model wrote.
    assert "<script>window.__pwned = 'script'</script>" in page.inner_text("body")
    assert page.url.startswith(live_server.url + f"/work/{study.slug}/item/")


def test_answers_sit_side_by_side_on_a_wide_screen_and_stack_on_a_phone(
    browser: Browser, live_server: Any
) -> None:
    study = live_study("browser-layout")
    make_pairs(study, 2)
    wide = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    arrive_and_consent(wide, live_server.url, study, "PIDWIDE")
    left, right = wide.locator("#answer-left"), wide.locator("#answer-right")
    left_box, right_box = left.bounding_box(), right.bounding_box()
    assert left_box and right_box
    assert left_box["y"] == right_box["y"] and left_box["x"] < right_box["x"]

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True).new_page()
    arrive_and_consent(phone, live_server.url, study, "PIDPHONE")
    left_box = phone.locator("#answer-left").bounding_box()
    right_box = phone.locator("#answer-right").bounding_box()
    assert left_box and right_box
    assert right_box["y"] >= left_box["y"] + left_box["height"]
    wide.context.close()
    phone.context.close()
