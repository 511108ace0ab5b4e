"""Where an ApplicationError that no door caught is answered: one mapping for pages, one for
the API (core/errors.py). A door that expects an error keeps catching it and answering as it
does; these only replace the server error an uncaught one used to give."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.errors import ApplicationError

logger = logging.getLogger(__name__)


class ApplicationErrorMiddleware:
    """Render an uncaught ApplicationError as a page with the site's template: its message, at
    its class's status (400, 409, ...). Any other exception goes on to Django's handling."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, ApplicationError):
            return None
        _log(request.path, exception)
        return render(
            request,
            "application_error.html",
            {"error": exception, "message": exception.message},
            status=exception.http_status,
        )


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: an ApplicationError becomes `{"detail": message, "code": code}`
    (and `field` when it names one) at its class's status; anything else as DRF answers it."""
    if not isinstance(exc, ApplicationError):
        return exception_handler(exc, context)
    request = context.get("request")
    _log(getattr(request, "path", "?"), exc)
    body: dict[str, str] = {"detail": exc.message, "code": exc.code}
    if exc.field:
        body["field"] = exc.field
    return Response(body, status=exc.http_status)


def _log(path: str, exc: ApplicationError) -> None:
    logger.info("%s at %s answered %s: %s", type(exc).__name__, path, exc.http_status, exc.message)
