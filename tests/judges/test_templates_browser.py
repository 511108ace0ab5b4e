"""A researcher's own template in Debian's Chromium: from the judge's page, edit the template,
read the prompt as it would be sent on a real pair of the study, check a sample reply against
the reply format, and save; an answer's script never runs and nothing is asked of the API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser

from annotation.models import Answer
from tests.browser import chromium
from tests.conftest import PASSWORD, Cast
from tests.e2e.test_layout_browser import OVERFLOW, WIDTH
from tests.judges.conftest import make_llm_judge, make_marked_pairs
from tests.judges.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINE = "Q: {question}\nFirst: {answer_first}\nSecond: {answer_second}\nScore 1-8, first line."


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def test_a_researcher_edits_a_template_previews_it_and_checks_a_reply_in_the_browser(
    browser: Browser, live_server: Any, cast: Cast, fake: FakeOpenAI
) -> None:
    (pair,) = make_marked_pairs(cast.study, 1)
    Answer.objects.filter(pk=pair.answer_b_id).update(
        turns=["<script>window.injected = 1</script> B's answer (ref main-study.p0-B)."]
    )
    judge = make_llm_judge(fake, study=cast.study)
    base = live_server.url
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", cast.researcher.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{base}/studies/{cast.study.slug}/judges/{judge.pk}/")
    page.click("#edit-templates")
    page.wait_for_selector("#judge-templates")
    assert page.locator(".preview-call").count() == 2  # both orders, on the study's first pair

    page.fill("#id_prompt_template", MINE.replace("{question}", "{questoin}"))
    page.click("#save-templates")
    page.wait_for_selector("#error-prompt_template")
    error = page.locator("#error-prompt_template").inner_text()
    assert "unknown variable {questoin}; did you mean {question}?" in error

    page.fill("#id_prompt_template", MINE)
    page.fill("#id_sample_reply", "3\nThe first reply is a little better.")
    page.click("#preview")
    page.wait_for_selector("#reply-check")
    first, second = page.locator(".preview-call pre").all_inner_texts()
    assert first.startswith("Q: Question 0?\nFirst: A short answer (ref main-study.p0-A).")
    assert second.startswith("Q: Question 0?\nFirst: <script>window.injected = 1</script> B's")
    assert page.evaluate("() => window.injected") is None  # shown as text, never run
    assert page.locator("#reply-parsed").inner_text() == "The reply parses."
    assert "preference B, Likert 6" in page.locator("#reply-check").inner_text()
    assert page.evaluate(OVERFLOW) == []

    page.fill("#id_sample_reply", "Somewhere between 3 and 4.")
    page.click("#preview")
    page.wait_for_selector("#reply-error")
    assert "more than one number on the first line" in page.locator("#reply-error").inner_text()

    page.click("#save-templates")
    page.wait_for_selector(".messages")
    assert f"Templates of {judge.name} saved." in page.locator(".messages").inner_text()
    judge.refresh_from_db()
    assert judge.prompt_template == MINE  # the browser's CR LF kept as typed, LF
    assert fake.requests() == {}
    page.close()
