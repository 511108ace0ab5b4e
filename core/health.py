"""Health endpoints for load balancers and container health checks.

- ``GET /healthz`` (liveness): the process answers; touches nothing else.
- ``GET /readyz`` (readiness): the database answers ``SELECT 1`` and Redis (the Celery broker)
  answers ``PING``, each within a second; 503 naming what failed otherwise.

They are answered by the first middleware, before host validation, the HTTPS redirect, sessions
and authentication: a health check from inside a container speaks plain HTTP to 127.0.0.1, and
neither answer says anything about a study. The JSON holds only "ok" or the error's class and
message.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse

HEALTH_PATHS = ("/healthz", "/readyz")


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _redis() -> str:
    import redis

    client = redis.Redis.from_url(
        settings.CELERY_BROKER_URL, socket_timeout=1.0, socket_connect_timeout=1.0
    )
    try:
        client.ping()
    finally:
        client.close()
    return "ok"


def readiness() -> tuple[bool, dict[str, str]]:
    """Whether the database and Redis answer, and what each said."""
    checks: dict[str, str] = {}
    for name, check in (("database", _database), ("redis", _redis)):
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - any failure means not ready, and is named
            checks[name] = f"{type(exc).__name__}: {exc}"
    return all(value == "ok" for value in checks.values()), checks


def _json(status: int, body: dict[str, object]) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


class HealthCheckMiddleware:
    """Answer GET or HEAD on /healthz and /readyz; pass every other request on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info not in HEALTH_PATHS or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        if request.path_info == "/healthz":
            return _json(200, {"status": "ok"})
        ready, checks = readiness()
        return _json(200 if ready else 503, {"status": "ok" if ready else "unavailable", **checks})
