"""A Content-Security-Policy on every response that does not set its own.

One fixed policy: scripts and styles only from Concord's own static files, no inline script, no
plugins, no framing, forms posting only to Concord. The annotator's pages send the same policy
themselves (annotation/views/work.py). A fixed header needs no nonces, so a small middleware does
it; a page that needs another policy sets the header itself and this one leaves it alone.

Browsers report what the policy blocked to /csp-report/ (`csp_report`): each report is logged
(logger "concord.csp"), at most CSP_REPORTS_PER_MINUTE per client address; more are answered
429 and not logged, so a client cannot fill the log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.clientaddr import request_client_address

logger = logging.getLogger("concord.csp")
CSP_REPORT_PATH = "/csp-report/"
CSP_REPORTS_PER_MINUTE = 30
# The report's fields that are logged, each cut to this many characters.
CSP_REPORT_FIELDS = ("document-uri", "violated-directive", "effective-directive", "blocked-uri")
CSP_FIELD_CHARS = 300

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    f"report-uri {CSP_REPORT_PATH}"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response


@csrf_exempt
@require_POST
def csp_report(request: HttpRequest) -> HttpResponse:
    """Log one browser report of a blocked resource (its document, directive and blocked URI),
    unless the client sent more than CSP_REPORTS_PER_MINUTE this minute (429). Answers 204."""
    key = f"csp-report:{request_client_address(request) or 'unknown'}"
    cache.add(key, 0, timeout=60)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between the add and the incr
        count = 1
    if count > CSP_REPORTS_PER_MINUTE:
        return HttpResponse(status=429)
    try:
        report = json.loads(request.body or b"{}").get("csp-report", {})
    except (ValueError, AttributeError):
        report = {}
    if not isinstance(report, dict):
        report = {}
    fields = {name: str(report.get(name, ""))[:CSP_FIELD_CHARS] for name in CSP_REPORT_FIELDS}
    logger.warning("csp violation %s", json.dumps(fields, sort_keys=True))
    return HttpResponse(status=204)
