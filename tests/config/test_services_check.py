"""`make test` stops with the command to run when PostgreSQL or Redis does not answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/check_services.py"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_services_check_passes_when_both_answer() -> None:
    result = check()
    assert result.returncode == 0, result.stderr
    assert "PostgreSQL and Redis answer" in result.stdout


def test_an_unreachable_postgres_fails_with_the_command_that_starts_it() -> None:
    result = check(DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed_port()}/concord")
    assert result.returncode == 1
    assert "error: PostgreSQL does not answer" in result.stderr
    assert "pg_ctlcluster" in result.stderr


def test_an_unreachable_redis_fails_with_the_command_that_starts_it() -> None:
    result = check(CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_port()}/0")
    assert result.returncode == 1
    assert "error: Redis does not answer" in result.stderr
    assert "redis-server --daemonize yes" in result.stderr
