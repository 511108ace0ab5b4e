"""Settings for `make demo`: the running demo's embedded servers, debug pages, a key kept under
var/, the demo entry panel; on this machine only.

The database, broker, rate limiter and cache are the production ones (PostgreSQL and Redis),
embedded and started by `scripts/demo.py`, which writes their addresses to
var/demo/services.json. Each convenience is opted into here, explicitly; none of them is a default
of the base settings.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# The demo keeps its servers' data, key and passwords here (tests point it elsewhere).
_VAR = Path(
    os.environ.setdefault("CONCORD_VAR_DIR", str(Path(__file__).resolve().parents[2] / "var"))
)
_VAR.mkdir(parents=True, exist_ok=True)
_SERVICES = _VAR / "demo" / "services.json"


def _demo_secret_key() -> str:
    """Return a random key made once for this checkout's demo and kept in var/ (owner-only)."""
    path = _VAR / "demo-secret-key"
    if not path.exists():
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def _demo_services() -> dict[str, str]:
    """The running demo's DATABASE_URL, CELERY_BROKER_URL, REDIS_URL and CACHE_URL."""
    try:
        return dict(json.loads(_SERVICES.read_text()))
    except FileNotFoundError:
        raise ImproperlyConfigured(
            f"The demo is not running ({_SERVICES} is missing): start it with `make demo`, "
            "then run this command again."
        ) from None


# The demo's own servers win over an outer shell's addresses: these settings mean "the demo".
os.environ.update(_demo_services())
os.environ.setdefault("SECRET_KEY", _demo_secret_key())
os.environ.setdefault("DJANGO_DEBUG", "true")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")

from config.settings.base import *  # noqa: E402,F403

# Anyone may annotate the demo study through /work/<study>/enter/demo/.
CONCORD_DEMO_PANEL = True
