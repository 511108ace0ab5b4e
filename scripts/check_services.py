"""Check that PostgreSQL and Redis answer before the test suite runs; say how to start them."""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlparse

STARTERS = {
    "PostgreSQL": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "Redis": 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no',
}


def _ping_postgres(url: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
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
    pg_url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    pg_url = pg_url.replace("postgres://", "postgresql://", 1)
    # The suite creates its own test database, so check the server through the maintenance db.
    pg_admin = pg_url.rsplit("/", 1)[0] + "/postgres"
    redis_url = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    failures = {
        name: error
        for name, error in (
            ("PostgreSQL", _ping_postgres(pg_admin)),
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
