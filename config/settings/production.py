"""Production settings: refuses to start without a real secret key, HTTPS everywhere."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import *  # noqa: F403
from config.settings.base import DEBUG, SECRET_KEY, env

if len(SECRET_KEY) < 50 or SECRET_KEY.startswith("test-only-"):
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a random string of at least 50 characters in production "
        "(for example: python -c 'import secrets; print(secrets.token_urlsafe(50))')."
    )
if DEBUG:
    raise ImproperlyConfigured("DJANGO_DEBUG must be false in production.")

SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 365)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
