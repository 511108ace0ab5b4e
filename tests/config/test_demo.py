"""`make demo`, run for real: `scripts/demo.py` starts the embedded PostgreSQL and Redis, migrates,
loads the demo study and serves it with a Celery worker and beat; the tests use the site over
HTTP and the worker through the broker, run commands beside it, then stop it as a user would.

The tests in this module run in order on one demo: the last ones stop it and start it again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 300.0
SERVICE_VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "CACHE_URL")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningDemo:
    process: subprocess.Popen[str]
    output_path: Path
    base: str
    port: int
    # Whether the demo's log-ins (their password files) existed when its port first answered.
    logins_when_first_served: bool

    @property
    def output(self) -> str:
        return self.output_path.read_text()

    def processes(self) -> list[psutil.Process]:
        """The supervisor, everything it started, and the PostgreSQL server's processes."""
        owner = psutil.Process(self.process.pid)
        found = [owner, *owner.children(recursive=True)]
        postmaster = _postmaster_pid(Path(self.output_path.parent))
        if postmaster is not None:
            server = psutil.Process(postmaster)
            found += [server, *server.children(recursive=True)]
        return found


def _postmaster_pid(var: Path) -> int | None:
    try:
        return int((var / "demo" / "postgres" / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


@pytest.fixture(scope="module")
def demo_env() -> Iterator[dict[str, str]]:
    # Not under pytest's own temporary folder: pytest keeps that owner-only (0700), and as root
    # the embedded PostgreSQL runs as its own user, who must reach its data folder.
    folder = Path(tempfile.mkdtemp(prefix="concord-demo-test-"))
    # The suite's own PostgreSQL and Redis addresses must not leak into the demo.
    env = {k: v for k, v in os.environ.items() if k not in {*SERVICE_VARIABLES, "SECRET_KEY"}}
    env.update(CONCORD_VAR_DIR=str(folder), DJANGO_SETTINGS_MODULE="config.settings.demo")
    env.pop("OPENAI_API_KEY", None)
    try:
        yield env
    finally:
        demo_stop_command(env)
        shutil.rmtree(folder, ignore_errors=True)


def demo_start(env: dict[str, str]) -> RunningDemo:
    """Start `scripts/demo.py start` (what `make demo` runs) and wait until it serves."""
    port = _free_port()
    output_path = Path(env["CONCORD_VAR_DIR"]) / "demo-output.txt"
    with output_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "scripts/demo.py", "start", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            # Its own process group, as a terminal's foreground job is: Ctrl-C reaches the group.
            start_new_session=True,
        )
    var = Path(env["CONCORD_VAR_DIR"])
    demo = RunningDemo(process, output_path, f"http://127.0.0.1:{port}", port, False)
    deadline = time.monotonic() + START_TIMEOUT
    served = False
    while "Serving on" not in demo.output:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the demo did not start:\n{demo.output}")
        if not served:
            logins = any(var.glob("demo-password-*"))
            with socket.socket() as probe:
                probe.settimeout(0.2)
                served = probe.connect_ex(("127.0.0.1", port)) == 0
            demo.logins_when_first_served = logins
        time.sleep(0.2)
    return demo


def demo_stop_command(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/demo.py", "stop"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(demo_env: dict[str, str]) -> Iterator[RunningDemo]:
    running = demo_start(demo_env)
    try:
        yield running
    finally:
        demo_stop_command(demo_env)


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run a manage.py command with the demo settings, beside the running demo."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def logins(output: str) -> dict[str, tuple[str, str]]:
    found = re.findall(r"^\s+(admin|researcher|annotator)\s+(demo-\S+)\s+(\S+)\s", output, re.M)
    return {role: (user, password) for role, user, password in found}


def csrf_of(html: str) -> str:
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert token is not None
    return token.group(1)


def logged_in(base: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=60)
    page = client.get("/accounts/login/")
    response = client.post(
        "/accounts/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": csrf_of(page.text),
        },
        headers={"Referer": f"{base}/accounts/login/"},
    )
    assert response.status_code == 302, response.text[:500]
    return client


def pair_count(output: str) -> int:
    found = re.search(r"Demo study 'demo': 34 prompts, (\d+) pairs", output)
    assert found is not None, output
    return int(found.group(1))


def test_the_site_answers_only_once_its_log_ins_exist(demo: RunningDemo) -> None:
    assert demo.logins_when_first_served


def test_the_demo_prints_what_each_login_is_for_and_how_to_give_a_judge_its_key(
    demo: RunningDemo,
) -> None:
    output = demo.output
    assert set(logins(output)) == {"admin", "researcher"}
    assert re.search(r"^\s+admin\s+demo-admin\s+\S+\s+the Django admin", output, re.M)
    researcher = r"^\s+researcher\s+demo-researcher\s+\S+\s+the demo study's pages"
    assert re.search(researcher, output, re.M)
    assert f"Annotate:      {demo.base}/work/demo/enter/demo/  (no log-in" in output
    assert "'gpt-4 (H4 Likert)': not configured: set OPENAI_API_KEY" in output
    assert "paste it on its page (stored encrypted; no restart)" in output
    assert "OPENAI_API_KEY=... make demo" in output
    assert "Ctrl-C here, or `make demo-stop`" in output


def test_the_demo_runs_on_embedded_postgresql_and_redis(
    demo: RunningDemo, demo_env: dict[str, str]
) -> None:
    probe = manage(
        demo_env,
        "shell",
        "-c",
        "import json; from django.conf import settings; from django.db import connection; "
        "from django.core.cache import caches; cache = caches['default']; cache.set('probe', 1); "
        "cursor = connection.cursor(); cursor.execute('SHOW server_version'); "
        "print(json.dumps({'vendor': connection.vendor, 'version': cursor.fetchone()[0], "
        "'broker': settings.CELERY_BROKER_URL, 'cache': type(cache).__name__, "
        "'cached': cache.get('probe')}))",
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["vendor"] == "postgresql"
    assert found["version"].startswith("18.")
    var = demo_env["CONCORD_VAR_DIR"]
    assert found["broker"].startswith(f"redis+socket://{var}/demo/")
    assert found["cache"] == "RedisCache" and found["cached"] == 1


def test_demo_serves_the_admin_to_the_admin(demo: RunningDemo) -> None:
    client = logged_in(demo.base, *logins(demo.output)["admin"])
    page = client.get("/admin/annotation/study/")
    assert page.status_code == 200
    assert "Demo: which answer is more helpful?" in page.text


def test_demo_serves_the_import_page_to_the_researcher(demo: RunningDemo) -> None:
    client = logged_in(demo.base, *logins(demo.output)["researcher"])
    page = client.get("/studies/demo/import/")
    assert page.status_code == 200
    assert 'type="file"' in page.text
    assert client.get("/admin/").status_code == 302


def test_a_person_can_annotate_the_demo_study_without_a_login(demo: RunningDemo) -> None:
    base = demo.base
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=60)
    entered = client.get("/work/demo/enter/demo/")
    assert entered.headers["location"] == "/work/demo/consent/"
    consent = client.get("/work/demo/consent/")
    agreed = client.post(
        "/work/demo/consent/",
        data={"agree": "yes", "csrfmiddlewaretoken": csrf_of(consent.text)},
        headers={"Referer": f"{base}/work/demo/consent/"},
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
        headers={"Referer": f"{base}{item_url}"},
    )
    assert saved.status_code == 302 and saved.headers["location"] == "/work/demo/"
    progress = client.get(client.get("/work/demo/").headers["location"])
    assert "1 / 10 done" in progress.text


def test_the_demo_worker_runs_a_baseline_judge_through_the_embedded_redis(
    demo: RunningDemo, demo_env: dict[str, str]
) -> None:
    assert "'baseline: random': ready" in demo.output
    run = manage(demo_env, "judge_run", "--study", "demo", "--judge", "baseline: random", "--wait")
    assert run.returncode == 0, run.stdout + run.stderr
    finished = re.search(
        r"run \d+ done: (\d+) done, 0 failed, 0 parse errors, 0 pending", run.stdout
    )
    assert finished is not None, run.stdout
    # The random baseline judges every pair in both orders.
    assert int(finished.group(1)) == 2 * pair_count(demo.output)


def test_the_analysis_page_shows_the_judge_run_to_the_researcher(demo: RunningDemo) -> None:
    client = logged_in(demo.base, *logins(demo.output)["researcher"])
    deadline = time.monotonic() + 180
    while True:
        page = client.get("/studies/demo/analysis/")
        if page.status_code == 200 and "baseline: random" in page.text:
            break
        assert time.monotonic() < deadline, page.text[:2000]
        time.sleep(2)
    assert "Analysis: Demo: which answer is more helpful?" in page.text


def test_generate_pairs_succeeds_while_the_demo_serves(
    demo: RunningDemo, demo_env: dict[str, str]
) -> None:
    made = manage(demo_env, "generate_pairs", "--study", "demo", "--strategy", "sample", "--k", "2")
    assert made.returncode == 0, made.stdout + made.stderr
    assert re.search(r"\d+ created, \d+ already present", made.stdout), made.stdout
    # The site keeps serving meanwhile.
    assert httpx.get(f"{demo.base}/accounts/login/", timeout=30).status_code == 200


def test_make_demo_stop_from_another_shell_stops_every_process_of_the_demo(
    demo: RunningDemo, demo_env: dict[str, str]
) -> None:
    started = demo.processes()
    names = " ".join(" ".join(p.cmdline()) for p in started)
    for part in ("runserver", "celery -A config worker", "celery -A config beat", "redis-server"):
        assert part in names
    assert any(p.name() == "postgres" for p in started)
    stopped = demo_stop_command(demo_env)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "has stopped" in stopped.stdout
    assert demo.process.wait(timeout=60) == 0
    gone, alive = psutil.wait_procs(started, timeout=30)
    assert alive == []
    assert not (Path(demo_env["CONCORD_VAR_DIR"]) / "demo" / "demo.pid").exists()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{demo.base}/accounts/login/", timeout=5)


def test_a_second_start_reuses_the_data_and_one_ctrl_c_stops_it(
    demo: RunningDemo, demo_env: dict[str, str]
) -> None:
    first = demo.output
    again = demo_start(demo_env)
    try:
        # Same log-ins, and the pairs that generate_pairs added are still there.
        assert logins(again.output) == logins(first)
        assert pair_count(again.output) > pair_count(first)
        client = logged_in(again.base, *logins(again.output)["researcher"])
        assert client.get("/studies/demo/import/").status_code == 200
        started = again.processes()
        # Ctrl-C in a terminal sends SIGINT to the foreground process group.
        os.killpg(again.process.pid, signal.SIGINT)
        assert again.process.wait(timeout=90) == 0
        gone, alive = psutil.wait_procs(started, timeout=30)
        assert alive == []
        assert "The demo has stopped." in again.output
    finally:
        if again.process.poll() is None:
            demo_stop_command(demo_env)


def test_a_second_demo_is_refused_and_a_killed_demo_leaves_nothing_that_demo_stop_misses(
    demo: RunningDemo, demo_env: dict[str, str]
) -> None:
    running = demo_start(demo_env)
    try:
        twice = subprocess.run(
            [sys.executable, "scripts/demo.py", "start", "--port", str(_free_port())],
            cwd=ROOT,
            env=demo_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert twice.returncode == 1
        assert f"already running (process {running.process.pid})" in twice.stdout
        children = psutil.Process(running.process.pid).children(recursive=True)
        postmaster = _postmaster_pid(Path(demo_env["CONCORD_VAR_DIR"]))
        assert postmaster is not None
        # SIGKILL leaves no chance to clean up: the children go with their parent anyway.
        running.process.kill()
        running.process.wait(timeout=30)
        gone, alive = psutil.wait_procs(children, timeout=60)
        assert alive == []
        # PostgreSQL runs on (a next start would reuse it); demo-stop stops it.
        server = psutil.Process(postmaster)
        assert server.is_running()
        stopped = demo_stop_command(demo_env)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "stopped what a killed one left: PostgreSQL" in stopped.stdout
        # pg_ctl returns once the server has removed its pid file, just before it exits.
        gone, alive = psutil.wait_procs([server], timeout=30)
        assert alive == []
    finally:
        if running.process.poll() is None:
            demo_stop_command(demo_env)
