"""The production deployment: health endpoints, gunicorn with the production settings as the
container runs it, static files through WhiteNoise, a plain-HTTP trial, the compose file."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.test import Client

from core.queues import Queue
from tests.config.django_process import ROOT, child_env, free_port
from tests.conftest import PASSWORD, Cast

COMPOSE = ROOT / "docker" / "compose.yaml"


def test_healthz_answers_without_touching_the_database(
    client: Client, db: None, django_assert_num_queries: object
) -> None:
    with django_assert_num_queries(0):  # type: ignore[operator]
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_readyz_says_ok_when_the_database_and_redis_answer(client: Client, db: None) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok"}


def test_readyz_names_redis_when_the_broker_does_not_answer(
    client: Client, db: None, settings: object
) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # type: ignore[attr-defined]
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["database"] == "ok"
    assert body["redis"].startswith("ConnectionError")


def _production_env(port: int, static_root: Path, **extra: str) -> dict[str, str]:
    return child_env(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY=secrets.token_urlsafe(60),
        DJANGO_DEBUG="false",
        ALLOWED_HOSTS="127.0.0.1",
        STATIC_ROOT=str(static_root),
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS="1",
        GUNICORN_ACCESS_LOG="",
        **extra,
    )


@pytest.fixture
def gunicorn(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path]]:
    """The web container's two commands run here: collectstatic as the image build does, then
    gunicorn with docker/gunicorn.conf.py and the production settings, on a free port."""
    port = free_port()
    static_root = tmp_path / "static"
    env = _production_env(port, static_root, **getattr(request, "param", {}))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = (tmp_path / "gunicorn.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", "docker/gunicorn.conf.py",
         "config.wsgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/healthz", timeout=2)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "gunicorn.log").read_text()) from None
                time.sleep(0.2)
        yield base, static_root
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.mark.django_db(transaction=True)
def test_gunicorn_with_the_production_settings_answers_health_and_serves_static_files(
    gunicorn: tuple[str, Path],
) -> None:
    base, static_root = gunicorn
    # Over plain HTTP from inside the container, with any Host: answered, not redirected.
    ready = httpx.get(base + "/readyz", headers={"Host": "web"})
    assert ready.status_code == 200, ready.text
    assert ready.json()["database"] == "ok"
    # Everything else goes to HTTPS.
    page = httpx.get(base + "/accounts/login/")
    assert page.status_code == 301 and page.headers["location"].startswith("https://")
    manifest = json.loads((static_root / "staticfiles.json").read_text())
    hashed = manifest["paths"]["concord.css"]
    assert re.fullmatch(r"concord\.[0-9a-f]{12}\.css", hashed)
    css = httpx.get(base + f"/static/{hashed}", headers={"X-Forwarded-Proto": "https"})
    assert css.status_code == 200 and "max-age=315360000" in css.headers["cache-control"]
    assert css.content == (ROOT / "config" / "static" / "concord.css").read_bytes()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "gunicorn",
    [{"SECURE_SSL_REDIRECT": "false", "SECURE_COOKIES": "false", "SECURE_HSTS_SECONDS": "0"}],
    indirect=True,
)
def test_a_plain_http_trial_logs_a_researcher_in_over_http(
    gunicorn: tuple[str, Path], cast: Cast
) -> None:
    base, _ = gunicorn
    # Production verifies with its own hashers (the tests' MD5 is not among them).
    hasher = PBKDF2PasswordHasher()
    cast.researcher.password = hasher.encode(PASSWORD, hasher.salt())
    cast.researcher.save(update_fields=["password"])
    with httpx.Client(base_url=base) as browser:
        page = browser.get("/accounts/login/")
        assert page.status_code == 200
        assert "secure" not in page.headers["set-cookie"].lower()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        login = browser.post(
            "/accounts/login/",
            data={
                "username": cast.researcher.username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": token.group(1),
            },
        )
        assert login.status_code == 302, login.text[:500]
        assert "sessionid" in browser.cookies
        assert "secure" not in login.headers["set-cookie"].lower()
        assert browser.get("/").status_code in (200, 302)


def test_the_production_settings_keep_cookies_secure_unless_told_otherwise() -> None:
    script = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT)"
    )
    base = {
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "DJANGO_DEBUG": "false",
    }

    def read(**env: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script],
            cwd=ROOT, env=child_env(**base, **env), capture_output=True, text=True, timeout=120,
            check=True,
        )  # fmt: skip
        return done.stdout.strip().splitlines()[-1]

    assert read() == "True True True"
    # Turning the redirect off (a proxy that redirects itself) leaves the cookies Secure.
    assert read(SECURE_SSL_REDIRECT="false") == "True True False"
    assert read(SECURE_SSL_REDIRECT="false", SECURE_COOKIES="false") == "False False False"


def test_the_compose_file_runs_every_queue_and_checks_web_and_workers() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    commands = {name: str(service.get("command", "")) for name, service in services.items()}
    served = set()
    for name, command in commands.items():
        if " worker " in f" {command} ":
            queues = re.search(r"-Q (\S+)", command)
            assert queues is not None, name
            served |= set(queues.group(1).split(","))
            assert "inspect ping" in " ".join(services[name]["healthcheck"]["test"])
    assert served == {queue.value for queue in Queue}
    assert sum("celery -A config beat" in c for c in commands.values()) == 1
    assert "docker/gunicorn.conf.py" in commands["web"]
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    assert "--maxmemory-policy noeviction" in commands["redis"]
    assert commands["migrate"] == "python manage.py migrate --noinput"
    assert services["web"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"
    }
    assert (ROOT / "docker" / "gunicorn.conf.py").is_file()
