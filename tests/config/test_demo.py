"""`make demo`'s steps, run for real: SQLite, the demo study, log-ins, and a served site."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SECRET_KEY"}}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.demo",
        DATABASE_URL=f"sqlite:///{folder / 'demo.sqlite3'}",
        CONCORD_VAR_DIR=str(folder),
    )
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def demo_output(demo_env: dict[str, str]) -> str:
    migrated = manage(demo_env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    first = manage(demo_env, "demo_setup")
    assert first.returncode == 0, first.stderr
    return first.stdout


@pytest.fixture(scope="module")
def demo_server(demo_env: dict[str, str], demo_output: str) -> Iterator[str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=demo_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/accounts/login/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.3)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=20)


def logins(output: str) -> dict[str, tuple[str, str]]:
    found = re.findall(r"^\s+(admin|researcher|annotator)\s+user (\S+)\s+(\S+)$", output, re.M)
    return {role: (user, password) for role, user, password in found}


def logged_in(base: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=30)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    response = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{base}/accounts/login/"},
    )
    assert response.status_code == 302, response.text[:500]
    return client


def test_demo_setup_loads_the_study_and_prints_three_logins(demo_output: str) -> None:
    assert "Demo study 'demo': 31 prompts" in demo_output
    assert set(logins(demo_output)) == {"admin", "researcher", "annotator"}


def test_demo_setup_runs_twice_without_duplicating_anything(
    demo_env: dict[str, str], demo_output: str
) -> None:
    again = manage(demo_env, "demo_setup")
    assert again.returncode == 0, again.stderr
    first_counts = demo_output.splitlines()[0]
    assert again.stdout.splitlines()[0] == first_counts
    assert logins(again.stdout) == logins(demo_output)


def test_demo_serves_the_admin_to_the_admin(demo_server: str, demo_output: str) -> None:
    client = logged_in(demo_server, *logins(demo_output)["admin"])
    page = client.get("/admin/annotation/study/")
    assert page.status_code == 200
    assert "Demo: which answer is more helpful?" in page.text


def test_demo_serves_the_import_page_to_the_researcher(demo_server: str, demo_output: str) -> None:
    client = logged_in(demo_server, *logins(demo_output)["researcher"])
    page = client.get("/studies/demo/import/")
    assert page.status_code == 200
    assert 'type="file"' in page.text
    assert client.get("/admin/").status_code == 302


def test_the_demo_worker_runs_a_baseline_judge_without_redis(
    demo_env: dict[str, str], demo_output: str
) -> None:
    assert "judge 'baseline: random': ready" in demo_output
    assert "judge 'gpt-4 (H4 Likert)': not configured" in demo_output
    env = {**demo_env, "CELERY_BROKER_URL": "filesystem://"}
    worker = subprocess.Popen(
        ["bash", "scripts/demo_worker.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        run = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "judge_run",
                "--study",
                "demo",
                "--judge",
                "baseline: random",
                "--wait",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    pairs = re.search(r"(\d+) pairs", demo_output)
    assert pairs is not None
    finished = re.search(
        r"run \d+ done: (\d+) done, 0 failed, 0 parse errors, 0 pending", run.stdout
    )
    assert finished is not None, run.stdout
    # The random baseline judges every pair in both orders.
    assert int(finished.group(1)) == 2 * int(pairs.group(1))
    # The broker's exchange tables stay in the demo's var folder, out of the checkout.
    assert (Path(demo_env["CONCORD_VAR_DIR"]) / "broker" / "control").is_dir()


def csrf_of(html: str) -> str:
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert token is not None
    return token.group(1)


def test_a_person_can_annotate_the_demo_study_in_the_browser(
    demo_server: str, demo_output: str
) -> None:
    link = re.search(r"Annotate:\s+(\S+)", demo_output)
    assert link is not None and link.group(1).endswith("/work/demo/enter/demo/")
    client = httpx.Client(base_url=demo_server, follow_redirects=False, timeout=30)
    entered = client.get("/work/demo/enter/demo/")
    assert entered.headers["location"] == "/work/demo/consent/"
    consent = client.get("/work/demo/consent/")
    agreed = client.post(
        "/work/demo/consent/",
        data={"agree": "yes", "csrfmiddlewaretoken": csrf_of(consent.text)},
        headers={"Referer": f"{demo_server}/work/demo/consent/"},
    )
    assert agreed.headers["location"] == "/work/demo/"
    item_url = client.get("/work/demo/").headers["location"]
    assert "/work/demo/item/" in item_url
    item = client.get(item_url)
    assert "Which answer is better?" in item.text
    submission = re.search(r'name="submission_id" value="([^"]+)"', item.text)
    assert submission is not None
    saved = client.post(
        item_url,
        data={
            "csrfmiddlewaretoken": csrf_of(item.text),
            "submission_id": submission.group(1),
            "likert": "2",
            "values": ["clarity"],
        },
        headers={"Referer": f"{demo_server}{item_url}"},
    )
    assert saved.status_code == 302 and saved.headers["location"] == "/work/demo/"
    progress = client.get(client.get("/work/demo/").headers["location"])
    assert "1 / 10 done" in progress.text
