"""Production settings refuse insecure configurations and pass Django's deployment checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG"}}
    clean.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres",
        ALLOWED_HOSTS="concord.example.org",
    )
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_refuses_to_start_without_a_secret_key() -> None:
    result = run_manage("check")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_refuses_a_short_secret_key() -> None:
    result = run_manage("check", SECRET_KEY="short")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_refuses_debug() -> None:
    result = run_manage("check", SECRET_KEY="k" * 60 + "-random-enough", DJANGO_DEBUG="true")
    assert result.returncode != 0
    assert "DJANGO_DEBUG must be false" in result.stderr


def test_production_settings_pass_the_deployment_checks() -> None:
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        SECRET_KEY="b8Qz-3vN_p1x0LrT9yK2mWc7sD4fHjE6aUiOgV5nBqZ-tXeRwYlPk1oMdCsA2hF",
    )
    assert result.returncode == 0, result.stdout + result.stderr
