"""Settings for the test suite: PostgreSQL and Redis on this machine, as in production."""

from __future__ import annotations

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# Tests clear the cache between cases; a database of its own keeps that from touching the rest.
os.environ.setdefault("CACHE_URL", "redis://127.0.0.1:6379/13")
# A key that is only ever used by the test suite; production refuses to start without its own.
os.environ.setdefault("SECRET_KEY", "test-only-key-not-for-production-" + "x" * 32)
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")

from config.settings.base import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Static files straight from the apps' folders, as in development (no collectstatic run).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The fake OpenAI server of the judge tests listens on a free port of this machine.
CONCORD_JUDGE_HOST_ALLOWLIST = [*CONCORD_JUDGE_HOST_ALLOWLIST, "127.0.0.1:*", "localhost:*"]  # noqa: F405
# The fake Prolific server of the tests, likewise (tests set PROLIFIC_API_BASE to its address).
CONCORD_PROLIFIC_HOST_ALLOWLIST = [*CONCORD_PROLIFIC_HOST_ALLOWLIST, "127.0.0.1:*"]  # noqa: F405
PROLIFIC_API_TIMEOUT_SECONDS = 2.0
