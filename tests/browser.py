"""Debian's Chromium driven by Playwright, for the browser tests; never a downloaded browser."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    """Launch the system Chromium headless, with Django's async guard lifted meanwhile.

    Playwright's sync API runs an event loop in this thread; the ORM calls the test makes around
    it are still synchronous. The guard comes back afterwards: a leftover would fail the
    deployment checks of any later test that starts manage.py.
    """
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()
                # Connections the test opened while Playwright's event loop ran live in that
                # loop's context: closed here, or they would outlive the test database.
                connections.close_all()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before
