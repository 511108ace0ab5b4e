"""A Content-Security-Policy on every response that does not set its own.

One fixed policy: scripts and styles only from Concord's own static files, no inline script, no
plugins, no framing, forms posting only to Concord. The annotator's pages send the same policy
themselves (annotation/views/work.py). A fixed header needs no nonces, so a small middleware does
it; a page that needs another policy sets the header itself and this one leaves it alone.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response
