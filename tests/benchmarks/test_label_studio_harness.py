"""The parts of the Label Studio comparison that do not need Label Studio itself.

The comparison (benchmarks/bench_label_studio.py) is run on demand, not in the tests; what it
counts and checks is tested here: the shared annotator loop, the invariants on Label Studio's
tables (a worked example on PostgreSQL), Label Studio's environment, and the skip when it is not
installed, through `run_all.py --only ls --no-install`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from benchmarks import bench_label_studio
from benchmarks.bench_http import LoadResult, RequestFailed, annotator_loop

ROOT = Path(__file__).resolve().parents[2]


def test_the_loop_counts_whole_cycles_and_errors_and_stops_when_the_work_runs_out() -> None:
    items = iter([1, "fail-next", 2, 3, None])
    submitted: list[Any] = []

    async def next_item(client: Any) -> Any:
        item = next(items)
        if item == "fail-next":
            raise RequestFailed("next 500")
        return item

    async def submit(client: Any, item: Any) -> None:
        if item == 2:
            raise RequestFailed("submit 400")
        submitted.append(item)

    result = LoadResult(annotators=1, seconds=0.0, cycles=0, errors=0)
    budget = [100]
    asyncio.run(annotator_loop(None, next_item, submit, time.monotonic() + 60, budget, result))
    assert submitted == [1, 3]
    assert (result.cycles, result.errors, result.exhausted) == (2, 2, 1)
    assert len(result.next_ms) == len(result.submit_ms) == 2
    assert budget == [95]


def test_the_loop_stops_when_the_shared_budget_is_spent() -> None:
    async def next_item(client: Any) -> Any:
        return 7

    async def submit(client: Any, item: Any) -> None:
        return None

    result = LoadResult(annotators=1, seconds=0.0, cycles=0, errors=0)
    asyncio.run(annotator_loop(None, next_item, submit, time.monotonic() + 60, [3], result))
    assert result.cycles == 3


@pytest.mark.django_db
def test_label_studio_invariants_count_over_annotated_twice_and_complete_tasks() -> None:
    connection.ensure_connection()
    conn = connection.connection
    # Label Studio's two tables, with only the columns the check reads.
    conn.execute("CREATE TEMP TABLE task (id int, project_id int)")
    conn.execute(
        "CREATE TEMP TABLE task_completion (task_id int, project_id int, completed_by_id int, "
        "was_cancelled bool)"
    )
    conn.execute("INSERT INTO task VALUES (1, 5), (2, 5), (3, 5), (4, 5), (9, 6)")
    rows = [
        (1, 5, 10, False), (1, 5, 11, False), (1, 5, 12, False),  # complete
        (2, 5, 10, False), (2, 5, 10, False),  # the same person twice
        (3, 5, 10, False), (3, 5, 11, False), (3, 5, 12, False), (3, 5, 13, False),  # over
        (4, 5, 10, True), (4, 5, 10, False),  # a skip does not count: fine
        (9, 6, 10, False), (9, 6, 10, False),  # another project
    ]  # fmt: skip
    with conn.cursor() as cursor:
        cursor.executemany("INSERT INTO task_completion VALUES (%s, %s, %s, %s)", rows)
    assert bench_label_studio.label_studio_invariants(conn, 5, 3) == {
        "pairs_over_overlap": 1,
        "worker_twice_on_a_pair": 1,
        "pairs_complete": 1,
        "pairs": 4,
    }


def test_label_studio_gets_its_database_and_no_outbound_reporting_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "venv/lib/python3.11/site-packages/label_studio").mkdir(parents=True)
    monkeypatch.setattr(bench_label_studio, "VENV", tmp_path / "venv")
    monkeypatch.setenv("DEBUG", "true")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "config.settings.test")
    env = bench_label_studio.label_studio_env(
        "postgres://bench:secret@127.0.0.1:5433/concord_ls", tmp_path / "data"
    )
    assert env["DEBUG"] == "false"
    assert env["DJANGO_SETTINGS_MODULE"] == "label_studio_settings"
    assert (env["DJANGO_DB"], env["POSTGRE_NAME"], env["POSTGRE_USER"]) == (
        "default",
        "concord_ls",
        "bench",
    )
    assert (env["POSTGRE_PASSWORD"], env["POSTGRE_HOST"], env["POSTGRE_PORT"]) == (
        "secret",
        "127.0.0.1",
        "5433",
    )
    assert env["COLLECT_ANALYTICS"] == env["LATEST_VERSION_CHECK"] == "false"
    assert env["SENTRY_DSN"] == env["FRONTEND_SENTRY_DSN"] == ""
    assert env["PYTHONPATH"].endswith("site-packages/label_studio")
    assert "DATABASE_URL" not in env and "CELERY_BROKER_URL" not in env


def test_label_studios_server_imports_its_own_core_package_not_concords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Label Studio's Django project has a top-level package `core` (its WSGI module is
    core.wsgi), as Concord has. Started from Concord's root, gunicorn found Concord's core and
    no worker booted ("No module named 'core.wsgi'"). A stand-in package with a core.wsgi of its
    own, under Concord's pinned gunicorn, must be the one served."""
    package = tmp_path / "venv/lib/python3.11/site-packages/label_studio"
    (package / "core").mkdir(parents=True)
    (package / "core/__init__.py").write_text("")
    (package / "core/wsgi.py").write_text(
        "def application(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [b'label studio core']\n"
    )
    (tmp_path / "venv/bin").mkdir()
    (tmp_path / "venv/bin/gunicorn").symlink_to(Path(sys.executable).parent / "gunicorn")
    monkeypatch.setattr(bench_label_studio, "VENV", tmp_path / "venv")
    monkeypatch.chdir(ROOT)
    env = bench_label_studio.label_studio_env(
        "postgres://bench@127.0.0.1:5432/concord_ls", tmp_path / "data"
    )
    server = bench_label_studio.LabelStudioServer(env=env, workers=1, log=tmp_path / "gunicorn.log")
    try:
        server.wait(timeout=60)
        assert httpx.get(server.base + "/health/", timeout=5).text == "label studio core"
    finally:
        server.stop()


def test_run_all_only_ls_without_label_studio_and_no_install_says_it_was_skipped(
    tmp_path: Path,
) -> None:
    env = dict(os.environ, BENCH_LABEL_STUDIO_VENV=str(tmp_path / "absent"))
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/run_all.py", "--only", "ls", "--no-install", "--json",
         str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())
    assert [r["figure"] for r in rows] == ["Label Studio 1.23.2"]
    assert rows[0]["value"].startswith("skipped: ") and "--no-install" in rows[0]["value"]
    assert "skipped" in done.stdout
    assert not (tmp_path / "absent").exists()
