"""Settings for `make demo`: SQLite, debug pages and a key kept under var/, on this machine only.

Each convenience is opted into here, explicitly; none of them is a default of the base settings.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

# The demo keeps its database, key, passwords and broker folders here (tests point it elsewhere).
_VAR = Path(
    os.environ.setdefault("CONCORD_VAR_DIR", str(Path(__file__).resolve().parents[2] / "var"))
)
_VAR.mkdir(parents=True, exist_ok=True)


def _demo_secret_key() -> str:
    """Return a random key made once for this checkout's demo and kept in var/."""
    path = _VAR / "demo-secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


os.environ.setdefault("DATABASE_URL", f"sqlite:///{_VAR / 'demo.sqlite3'}")
os.environ.setdefault("SECRET_KEY", _demo_secret_key())
os.environ.setdefault("DJANGO_DEBUG", "true")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
# The demo's worker uses kombu's file-system transport, so it needs no Redis.
os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")

from config.settings.base import *  # noqa: E402,F403
from config.settings.base import CELERY_BROKER_URL  # noqa: E402

# Anyone may annotate the demo study through /work/<study>/enter/demo/.
CONCORD_DEMO_PANEL = True

if CELERY_BROKER_URL == "filesystem://":
    for _folder in ("broker/in", "broker/processed", "broker/control"):
        (_VAR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_VAR / "broker" / "in"),
        "data_folder_out": str(_VAR / "broker" / "in"),
        "processed_folder": str(_VAR / "broker" / "processed"),
        "store_processed": False,
        # kombu's default is ./control, which would land in the checkout.
        "control_folder": str(_VAR / "broker" / "control"),
    }

# The demo runs one web process and no Redis: an in-process cache is enough there.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
