"""Check that PostgreSQL and Redis answer before the test suite runs; say how to start them.

Run with DJANGO_SETTINGS_MODULE set: it checks the database and broker that those settings name.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

STARTERS = {
    "PostgreSQL": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "Redis": 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no',
}


def _ping_postgres(db: dict[str, Any]) -> str | None:
    """Connect through the maintenance database and create `database` if it is missing, so that
    `manage.py check` and `makemigrations --check` find the database the settings name."""
    import psycopg
    from psycopg import sql

    database = db["NAME"]
    params: dict[str, Any] = {
        key.lower(): db[key] for key in ("HOST", "PORT", "USER", "PASSWORD") if db.get(key)
    }
    try:
        with psycopg.connect(
            dbname="postgres", connect_timeout=3, autocommit=True, **params
        ) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [database]
            ).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    except psycopg.Error as exc:
        return str(exc).strip()
    return None


def _ping_redis(url: str) -> str | None:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 6379
    try:
        with socket.create_connection((host, port), timeout=3) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError as exc:
        return f"{host}:{port}: {exc}"
    return None if reply.startswith(b"+PONG") else f"unexpected reply {reply!r}"


def main() -> int:
    """Return 0 when both services answer, 1 with instructions otherwise."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import django
    from django.conf import settings

    django.setup()
    redis_url = settings.CELERY_BROKER_URL
    failures = {
        name: error
        for name, error in (
            ("PostgreSQL", _ping_postgres(settings.DATABASES["default"])),
            ("Redis", _ping_redis(redis_url)),
        )
        if error
    }
    if not failures:
        print("services: PostgreSQL and Redis answer.")
        return 0
    for name, error in failures.items():
        print(f"error: {name} does not answer ({error}).", file=sys.stderr)
        print(f"  start it with: {STARTERS[name]}", file=sys.stderr)
    print(
        "The test suite runs on PostgreSQL and Redis, as production does; it will not skip.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
