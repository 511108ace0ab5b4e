"""The log-in backend's old path, kept so that moving it to core/auth.py logs nobody out.

A session stores the dotted path of the backend that logged its user in, and Django reads the
user only if that path is still in AUTHENTICATION_BACKENDS. Sessions made before the move name
`config.auth.AccountBackend`; without this alias every researcher and every worker in the middle
of a task would be logged out once at the deploy (a worker who came through a crowd platform's
link may not find the way back). The alias reads those sessions' users exactly as
:class:`core.auth.AccountBackend` does and never checks a password, so a log-in costs no second
hash. Delete it, and its line in AUTHENTICATION_BACKENDS, once SESSION_COOKIE_AGE (two weeks)
has passed since the deploy of the move: no session can name it any more.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest

from core.auth import AccountBackend as _AccountBackend


class AccountBackend(_AccountBackend):
    """Reads the user of a session stored under the old path; logs nobody in."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        return None
