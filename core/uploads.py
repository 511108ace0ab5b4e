"""Refuse a request body larger than its path allows before any of it is read.

Django parses a multipart body (and writes its files to disk) as soon as anything reads
`request.POST`, which the CSRF middleware does before any view runs; a view's own size check
would come after the whole body is on disk (an anonymous 150 MiB POST to the log-in page was
read in full and written to a temporary file before its 403). This middleware, placed before
the CSRF middleware, answers from the headers alone: 413 for a Content-Length over the path's
limit (the import page: CONCORD_MAX_IMPORT_BYTES plus the form's overhead; every other path:
CONCORD_MAX_BODY_BYTES), and 411 for a body sent without a Content-Length (chunked), whose size
the headers cannot tell. Django reads at most Content-Length bytes of the body, so a body that
passes is bounded too.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

# Room for the form's other fields and the multipart boundaries around the file.
FORM_OVERHEAD_BYTES = 1 << 20
# The views that take a file upload (namespace:name), allowed CONCORD_MAX_IMPORT_BYTES.
UPLOAD_VIEWS = frozenset({"annotation:study_import"})


def body_limit(path: str) -> tuple[int, int]:
    """The largest request body, in bytes, that `path` accepts, and the size to tell a user (the
    file's, for an upload)."""
    try:
        view = resolve(path).view_name
    except Resolver404:
        view = ""
    if view in UPLOAD_VIEWS:
        upload = int(settings.CONCORD_MAX_IMPORT_BYTES)
        return upload + FORM_OVERHEAD_BYTES, upload
    return int(settings.CONCORD_MAX_BODY_BYTES), int(settings.CONCORD_MAX_BODY_BYTES)


def _refusal(status: int, text: str) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


class RequestSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        if (
            not meta.get("CONTENT_LENGTH")
            and "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()
        ):
            return _refusal(411, "A request body needs a Content-Length.")
        try:
            length = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _refusal(400, "The Content-Length is not a number.")
        if length > settings.CONCORD_MAX_BODY_BYTES:
            limit, shown = body_limit(request.path_info)
            if length > limit:
                megabytes = shown / (1 << 20)
                return _refusal(413, f"The upload is too large: at most {megabytes:g} MB.")
        return self.get_response(request)
