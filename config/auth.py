"""Password log-in throttling: django-axes, wired to Concord's client address.

django-axes counts failed log-ins in the database (its AccessAttempt table, visible in the
admin) and refuses further attempts for a username from one address once AXES_FAILURE_LIMIT is
reached, for AXES_COOLOFF_TIME. It covers every form that calls Django's `authenticate` with the
request: `/accounts/login/` and `/admin/login/`.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class WebLoginThrottleBackend(AxesStandaloneBackend):
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
