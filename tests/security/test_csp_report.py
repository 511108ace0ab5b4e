"""Browsers report what the Content-Security-Policy blocked; the reports are logged, and one
client cannot send more than the limit."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.cache import cache
from django.test import Client

from core.csp import CSP_REPORTS_PER_MINUTE

REPORT = {
    "csp-report": {
        "document-uri": "https://concord.example/studies/demo/analysis/",
        "violated-directive": "script-src 'self'",
        "effective-directive": "script-src",
        "blocked-uri": "https://evil.example/x.js",
    }
}


@pytest.fixture(autouse=True)
def fresh_limit() -> None:
    cache.clear()


def _send(client: Client, body: object = REPORT) -> int:
    data = json.dumps(body)
    return client.post("/csp-report/", data, content_type="application/csp-report").status_code


def test_every_page_names_the_report_endpoint_and_a_report_is_logged(
    db: None, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 27: CSP violations were blocked but never reported.
    client = Client(enforce_csrf_checks=True)
    assert "report-uri /csp-report/" in client.get("/accounts/login/")["Content-Security-Policy"]
    with caplog.at_level(logging.WARNING, logger="concord.csp"):
        assert _send(client) == 204
    [record] = [r for r in caplog.records if r.name == "concord.csp"]
    assert "https://evil.example/x.js" in record.getMessage()
    assert "script-src" in record.getMessage()


def test_one_client_past_the_limit_is_refused_and_not_logged(
    db: None, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client()
    with caplog.at_level(logging.WARNING, logger="concord.csp"):
        statuses = [_send(client) for _ in range(CSP_REPORTS_PER_MINUTE + 5)]
    assert statuses.count(204) == CSP_REPORTS_PER_MINUTE
    assert statuses[CSP_REPORTS_PER_MINUTE:] == [429] * 5
    assert len([r for r in caplog.records if r.name == "concord.csp"]) == CSP_REPORTS_PER_MINUTE


def test_a_malformed_report_is_answered_and_a_get_is_not_allowed(db: None) -> None:
    client = Client()
    assert client.post("/csp-report/", "not json", content_type="text/plain").status_code == 204
    assert _send(client, ["a list"]) == 204
    assert client.get("/csp-report/").status_code == 405
