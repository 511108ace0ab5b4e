"""Password log-in throttling: django-axes, wired to Concord's client address.

django-axes counts failed log-ins in the database (its AccessAttempt table, visible in the
admin) and refuses further attempts for a username from one address once AXES_FAILURE_LIMIT is
reached, for AXES_COOLOFF_TIME. It covers every form that calls Django's `authenticate` with the
request: `/accounts/login/` and `/admin/login/`.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from core.db.prepared import PreparedSelect


class WebLoginThrottleBackend(AxesStandaloneBackend):  # type: ignore[misc]  # axes ships no types
    """Axes' backend, throttling log-ins that come with a web request.

    A call of `authenticate` without a request (a management command, the test client's
    `login`) is not a password typed into a form on the web, so there is no address to throttle:
    it passes on to the next backend instead of raising as axes' own backend does.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        super().authenticate(request, username=username, password=password, **kwargs)
        return None


class AccountBackend(ModelBackend):
    """Django's password backend, reading the session's user with SQL compiled once per process.

    Every request of a logged-in user reads that user by primary key; Django's own backend
    builds and compiles that query each time, which cost more Python time than the database
    took. Passwords, `is_active` and permissions behave exactly as in `ModelBackend`.
    """

    def get_user(self, user_id: Any) -> User | None:
        try:
            pk = _USER_MODEL._meta.pk.to_python(user_id)  # the session stores it as text
        except ValidationError:
            return None
        user = _USER.first(pk)
        return user if user is not None and self.user_can_authenticate(user) else None


_USER_MODEL = get_user_model()
_USER: PreparedSelect[User] = PreparedSelect(lambda pk: _USER_MODEL._default_manager.filter(pk=pk))
