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
# Cookies only over HTTPS. SECURE_COOKIES=false (with SECURE_SSL_REDIRECT=false) is for a
# plain-HTTP trial on a LAN only: docs/deployment.md.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=True)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 365)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
# Static files: hashed names (cached for a year) and precompressed copies, built by
# collectstatic in the image and served by WhiteNoise.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
