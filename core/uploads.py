"""Refuse a request body larger than the largest import before any of it is read.

Django parses a multipart body (and writes its files to disk) as soon as anything reads
`request.POST`, which the CSRF middleware does before any view runs; a view's own size check
would come after the whole body is on disk. This middleware, placed before the CSRF middleware,
answers 413 from the Content-Length header alone.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

# Room for the form's other fields and the multipart boundaries around the file.
FORM_OVERHEAD_BYTES = 1 << 20


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.CONCORD_MAX_IMPORT_BYTES + FORM_OVERHEAD_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            megabytes = settings.CONCORD_MAX_IMPORT_BYTES / (1 << 20)
            return HttpResponse(
                f"The upload is too large: at most {megabytes:.0f} MB.",
                status=413,
                content_type="text/plain; charset=utf-8",
            )
        return self.get_response(request)
