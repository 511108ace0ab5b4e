"""Run Django in a process of its own against the test database (for what must start clean)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """The URL of the database pytest made, for a child process that must see committed rows."""
    database = settings.DATABASES["default"]
    password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
    return (
        f"postgres://{database['USER']}{password}@{database['HOST']}:{database['PORT']}/"
        f"{database['NAME']}"
    )


def child_env(**overrides: str) -> dict[str, str]:
    """This process's environment pointed at the test database, with `overrides`."""
    env = dict(os.environ)
    env["DATABASE_URL"] = test_database_url()
    env.update(overrides)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
