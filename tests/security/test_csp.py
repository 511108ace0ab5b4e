"""Every page carries the Content-Security-Policy, and no page relies on inline script."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.annotation.work_helpers import make_pairs
from tests.conftest import PASSWORD, Cast

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)


def routes(patterns: list, prefix: str = "") -> Iterator[str]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def page_urls(slug: str) -> list[str]:
    """Every GET route that needs no id, or only the study's slug."""
    urls = set()
    for route in routes(get_resolver().url_patterns):
        if route.startswith(("^", "admin/")) or "(?P" in route:
            continue
        route = route.replace("<slug:slug>", slug).replace("<str:slug>", slug)
        if "<" in route:
            continue
        urls.add("/" + route)
    return sorted(urls)


@pytest.mark.parametrize("who", ["ada-admin", "rhea-researcher", "wendy-worker", None])
def test_every_page_sends_the_policy_and_no_inline_script(cast: Cast, who: str | None) -> None:
    make_pairs(cast.study, 2)
    client = Client()
    if who:
        assert client.login(username=who, password=PASSWORD)
    urls = page_urls(cast.study.slug) + ["/admin/", "/admin/login/", "/no-such-page/"]
    assert len(urls) > 20
    for url in urls:
        response = client.get(url)
        assert response.status_code < 500 or response.status_code == 503, url  # 503: report queued
        policy = response.get("Content-Security-Policy", "")
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy, url
        if response.get("Content-Type", "").startswith("text/html"):
            body = response.content.decode()
            assert not INLINE_SCRIPT.search(body), url
            assert not INLINE_HANDLER.search(body), url


def test_the_run_page_loads_its_script_from_a_file(cast: Cast) -> None:
    from judges.models import Judge, JudgeRun

    judge = Judge.objects.create(name="j", kind=Judge.Kind.LLM, model_name="m")
    run = JudgeRun.objects.create(study=cast.study, judge=judge)
    client = Client()
    assert client.login(username="rhea-researcher", password=PASSWORD)
    page = client.get(f"/studies/{cast.study.slug}/judges/runs/{run.pk}/")
    assert page.status_code == 200
    assert "judges/run_detail" in page.content.decode()
    assert not INLINE_SCRIPT.search(page.content.decode())
