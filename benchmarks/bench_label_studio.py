"""Concord beside Label Studio 1.23.2: 8 annotators looping next + submit, then an export.

Run from the repository root with DATABASE_URL pointing at a PostgreSQL server and REDIS_URL at
a Redis (loopback only):

    .venv/bin/python benchmarks/bench_label_studio.py --tasks 100000 --seconds 30 [--json out]

Label Studio is installed from PyPI (`label-studio==1.23.2`, and gunicorn at Concord's pin) into
its own virtual environment, `var/label-studio-venv`, the first time (about 5-8 minutes), and
reused after; `--no-install` skips the comparison instead when it is absent. Both sides run on
the same PostgreSQL server, each in a database of its own (DATABASE_URL's name + "_ls" for Label
Studio, + "_lsc" for Concord), dropped at the end, and behind gunicorn with the same number of
sync workers (`--server-workers`, 4). In one run:

1. Concord: a live study of `--tasks` pairs, overlap 3 (as benchmarks/bench_http.py builds it).
2. Label Studio: migrated; an owner and `--annotators` annotator accounts with API tokens in one
   organization (benchmarks/label_studio_side.py, inside Label Studio's venv, as its `user`
   command makes them); then over its HTTP API a project with a pairwise-preference labeling
   config, maximum_annotations 3 and `--sampling` (its default, sequential), and `--tasks` tasks
   imported through POST /api/projects/<id>/import in batches (timed).
3. The same loop on both (bench_http.annotator_loop): each annotator asks for the next item and
   submits it, for `--seconds`. Concord: POST /work/<slug>/api/next/ and .../submit/. Label
   Studio: GET /api/projects/<id>/next/ and POST /api/tasks/<id>/annotations/ with a pairwise
   result. Cycles per second, p50/p95/p99 of next and of submit, errors; then the invariants in
   each database: no item with more than 3 annotations, nobody twice on an item.
4. Export (`--export-per-task K`, 0 to skip): every Label Studio task filled to K annotations
   (bulk, in its own process) and exported through its snapshot API (POST /api/projects/<id>/
   exports/, which runs in the request without an RQ worker, then the download), against
   Concord's streamed export of the same number of judgments (JSONL and CSV).

It prints one line per figure and, with `--json`, writes the rows for benchmarks/run_all.py.
Label Studio runs with its analytics, version check and Sentry reporting off (COLLECT_ANALYTICS,
LATEST_VERSION_CHECK, SENTRY_DSN, FRONTEND_SENTRY_DSN) and its feature flags offline; it reaches
nothing beyond loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_http import (  # noqa: E402
    GunicornProcess,
    LoadResult,
    RequestFailed,
    run_annotators,
)

VERSION = "1.23.2"
# BENCH_LABEL_STUDIO_VENV: another place for it (the tests point it at an empty folder).
VENV = Path(os.environ.get("BENCH_LABEL_STUDIO_VENV", ROOT / "var" / "label-studio-venv"))
LABEL_CONFIG = """<View>
  <Header value="$prompt"/>
  <Pairwise name="preference" toName="answer_a,answer_b"/>
  <Text name="answer_a" value="$answer_a"/>
  <Text name="answer_b" value="$answer_b"/>
</View>"""
RESULT = [
    {
        "from_name": "preference",
        "to_name": "answer_a",
        "type": "pairwise",
        "value": {"selected": "left"},
    }
]
SAMPLING = {"sequential": "Sequential sampling", "uniform": "Uniform sampling"}


def gunicorn_pin() -> str:
    """Concord's own gunicorn pin, so that both servers are the same program."""
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.startswith("gunicorn=="):
            return line.split("#")[0].strip()
    raise RuntimeError("requirements.txt pins no gunicorn")


def installed() -> bool:
    return (VENV / "bin" / "label-studio").exists() and (VENV / "bin" / "gunicorn").exists()


def install() -> float:
    """Label Studio and gunicorn from PyPI into var/label-studio-venv; seconds it took."""
    began = time.perf_counter()
    VENV.parent.mkdir(parents=True, exist_ok=True)
    if not (VENV / "bin" / "python").exists():
        subprocess.run(["python3.11", "-m", "venv", str(VENV)], check=True)
    print(f"installing label-studio=={VERSION} into {VENV} (minutes)", flush=True)
    subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "--quiet", f"label-studio=={VERSION}",
         gunicorn_pin()],
        check=True,
    )  # fmt: skip
    return time.perf_counter() - began


def package_dir() -> Path:
    found = sorted(VENV.glob("lib/python3*/site-packages/label_studio"))
    if not found:
        raise RuntimeError(f"{VENV} has no label_studio package")
    return found[0]


def database_url(base: str, suffix: str) -> str:
    parts = urlparse(base)
    return urlunparse(parts._replace(path=parts.path.rstrip("/") + suffix))


def recreate(url: str, *, drop_only: bool = False) -> None:
    from benchmarks.bench_report import recreate_database

    recreate_database(url, urlparse(url).path.lstrip("/"), drop_only=drop_only)


def label_studio_env(url: str, data_dir: Path) -> dict[str, str]:
    """Label Studio's environment: its database, data folder and no outbound reporting.

    Built from nothing but PATH and HOME, because Label Studio reads many plain names (DEBUG,
    ALLOWED_HOSTS, LOG_LEVEL, ...) that Concord's environment may hold."""
    db = urlparse(url)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(data_dir),
        # Its export writes a temporary copy of the file: into the folder removed at the end.
        "TMPDIR": str(data_dir),
        "PYTHONPATH": f"{ROOT / 'benchmarks'}:{package_dir()}",
        "DJANGO_SETTINGS_MODULE": "label_studio_settings",
        "DJANGO_DB": "default",
        "POSTGRE_NAME": db.path.lstrip("/"),
        "POSTGRE_USER": db.username or "postgres",
        "POSTGRE_PASSWORD": db.password or "",
        "POSTGRE_HOST": db.hostname or "127.0.0.1",
        "POSTGRE_PORT": str(db.port or 5432),
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "BENCH_REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"),
        "SECRET_KEY": "bench-" + uuid.uuid4().hex,
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "COLLECT_ANALYTICS": "false",
        "LATEST_VERSION_CHECK": "false",
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
        "FEATURE_FLAGS_OFFLINE": "true",
        "ALLOWED_HOSTS": "127.0.0.1",
    }


def side(env: dict[str, str], *args: str, timeout: float = 1800) -> dict[str, Any]:
    """Run benchmarks/label_studio_side.py in Label Studio's venv; its JSON line."""
    done = subprocess.run(
        [str(VENV / "bin" / "python"), str(ROOT / "benchmarks" / "label_studio_side.py"), *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=package_dir(),
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"label_studio_side.py {args[0]} failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class LabelStudioServer(GunicornProcess):
    """Label Studio's WSGI application under gunicorn, sync workers, on a free loopback port."""

    ready_path = "/health/"

    def __init__(self, *, env: dict[str, str], workers: int, log: Path) -> None:
        super().__init__(log)
        # The timeout is for the export request, which writes the snapshot inside the request.
        self.start(
            [str(VENV / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{self.port}",
             "--workers", str(workers), "--worker-class", "sync", "--timeout", "1800",
             "--chdir", str(package_dir()), "core.wsgi:application"],
            env=env,
            # Started from Concord's root, gunicorn put it on the path, and Concord's core/
            # hid Label Studio's core (its WSGI module).
            cwd=package_dir(),
        )  # fmt: skip


def _api(base: str, token: str, timeout: float = 1800) -> Any:
    import httpx

    return httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=timeout)


def _checked(response: Any, expected: int, what: str) -> Any:
    if response.status_code != expected:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:300]}")
    return response.json()


def make_project(
    base: str, owner: str, *, tasks: int, sampling: str, batch: int
) -> tuple[int, float]:
    """The project and its tasks over Label Studio's API; its id and the import's seconds."""
    with _api(base, owner) as client:
        project = _checked(
            client.post(
                "/api/projects/",
                json={
                    "title": "Benchmark",
                    "label_config": LABEL_CONFIG,
                    "maximum_annotations": 3,
                    "sampling": SAMPLING[sampling],
                },
            ),
            201,
            "create the project",
        )["id"]
        began = time.perf_counter()
        for start in range(0, tasks, batch):
            rows = [
                {"prompt": f"q{i}", "answer_a": "a", "answer_b": "b"}
                for i in range(start, min(tasks, start + batch))
            ]
            _checked(client.post(f"/api/projects/{project}/import", json=rows), 201, "import")
        return project, time.perf_counter() - began


def run_label_studio(
    base: str, project: int, tokens: list[str], seconds: float, max_cycles: int
) -> LoadResult:
    """Label Studio's annotators: GET /api/projects/<id>/next/ (404 when nothing is left), then
    POST /api/tasks/<id>/annotations/ with a pairwise result."""

    async def next_item(client: Any) -> Any | None:
        response = await client.get(f"/api/projects/{project}/next/")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise RequestFailed(f"next {response.status_code} {response.text[:200]}")
        return response.json()["id"]

    async def submit(client: Any, task: Any) -> None:
        response = await client.post(
            f"/api/tasks/{task}/annotations/",
            json={"result": RESULT, "lead_time": 1.0, "project": project},
        )
        if response.status_code != 201:
            raise RequestFailed(f"submit {response.status_code} {response.text[:200]}")

    clients = [{"base_url": base, "headers": {"Authorization": f"Token {t}"}} for t in tokens]
    return run_annotators(clients, next_item, submit, seconds, max_cycles)


def label_studio_invariants(conn: Any, project: int, overlap: int) -> dict[str, int]:
    """The same counts as bench_http.invariants, on Label Studio's tables (`task`,
    `task_completion`, through the psycopg connection `conn`): tasks with more than `overlap`
    annotations, tasks someone annotated twice, tasks with `overlap` distinct annotators, tasks.
    Cancelled (skipped) annotations do not count, as Label Studio does not count them."""
    over, twice, complete = conn.execute(
        """
        SELECT count(*) FILTER (WHERE n > %(overlap)s),
               count(*) FILTER (WHERE people <> n),
               count(*) FILTER (WHERE people = %(overlap)s)
        FROM (SELECT task_id, count(*) AS n, count(DISTINCT completed_by_id) AS people
              FROM task_completion WHERE project_id = %(project)s AND NOT was_cancelled
              GROUP BY task_id) per_task
        """,
        {"project": project, "overlap": overlap},
    ).fetchone()
    (tasks,) = conn.execute("SELECT count(*) FROM task WHERE project_id = %s", [project]).fetchone()
    return {
        "pairs_over_overlap": int(over),
        "worker_twice_on_a_pair": int(twice),
        "pairs_complete": int(complete),
        "pairs": int(tasks),
    }


def annotation_count(url: str, project: int) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM task_completion WHERE project_id = %s", [project]
        ).fetchone()
    return int(row[0]) if row else 0


def export_label_studio(base: str, owner: str, project: int) -> tuple[float, int]:
    """A JSON snapshot of every task through the export API, and its download."""
    with _api(base, owner) as client:
        began = time.perf_counter()
        snapshot = _checked(
            client.post(f"/api/projects/{project}/exports/", json={"title": "bench"}),
            201,
            "create the export snapshot",
        )
        if snapshot.get("status") != "completed":
            raise RuntimeError(f"the export snapshot is {snapshot.get('status')}, not completed")
        size = 0
        with client.stream(
            "GET",
            f"/api/projects/{project}/exports/{snapshot['id']}/download",
            params={"exportType": "JSON"},
            follow_redirects=True,
        ) as response:
            if response.status_code != 200:
                raise RuntimeError(f"export download: {response.status_code}")
            for chunk in response.iter_bytes():
                size += len(chunk)
        return time.perf_counter() - began, size


def export_concord(judgments: int) -> list[tuple[str, float, int]]:
    """Concord's streamed export of `judgments` judgments (JSONL and CSV): seconds and bytes."""
    from benchmarks.bench_export import measured
    from benchmarks.bench_report import fill

    fill(judgments=judgments, calls=0, judges=1, seed=0)
    from annotation.models import Study
    from leaderboard.services.exports import study_export_write

    study = Study.objects.get(slug="bench")
    out = []
    for fmt in ("jsonl", "csv"):
        path = Path(tempfile.mkstemp(suffix="." + fmt)[1])

        def job(fmt: str = fmt, path: Path = path) -> int:
            with path.open("wb") as handle:
                study_export_write(study=study, table="judgments", fmt=fmt, out=handle)
            return path.stat().st_size

        seconds, _mb, size = measured(job)
        path.unlink(missing_ok=True)
        out.append((fmt, seconds, size))
    return out


def combined(runs: list[LoadResult]) -> LoadResult:
    """Several windows of the same side as one: their cycles, time, errors and latencies."""
    out = LoadResult(annotators=runs[0].annotators, seconds=0.0, cycles=0, errors=0)
    for r in runs:
        out.seconds += r.seconds
        out.cycles += r.cycles
        out.errors += r.errors
        out.exhausted += r.exhausted
        out.next_ms += r.next_ms
        out.submit_ms += r.submit_ms
    return out


def load_text(s: dict[str, Any]) -> str:
    inv = s["invariants"]
    bad = inv["pairs_over_overlap"] + inv["worker_twice_on_a_pair"]
    return (
        f"{s['cycles_per_s']:.2f} cycles/s ({s['cycles']} in {s['seconds']:.0f} s), next p50/p95/"
        f"p99 {s['next_p50_ms']:.0f}/{s['next_p95_ms']:.0f}/{s['next_p99_ms']:.0f} ms, submit "
        f"p50/p95/p99 {s['submit_p50_ms']:.0f}/{s['submit_p95_ms']:.0f}/{s['submit_p99_ms']:.0f}"
        f" ms, {s['errors']} errors, invariants {'ok' if not bad else 'VIOLATED'}"
    )


def main() -> int:
    import logging

    import psycopg

    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="pairs / tasks on each side")
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0, help="the window of each loop")
    parser.add_argument("--max-cycles", type=int, default=100_000)
    parser.add_argument(
        "--rounds", type=int, default=1, help="windows of each, alternating Concord, LS, ..."
    )
    parser.add_argument("--server-workers", type=int, default=4)
    parser.add_argument("--sampling", choices=sorted(SAMPLING), default="sequential")
    parser.add_argument("--import-batch", type=int, default=10_000, help="tasks per import")
    parser.add_argument(
        "--export-per-task",
        type=int,
        default=1,
        help="annotations per Label Studio task before the export (0: no export)",
    )
    parser.add_argument("--no-install", action="store_true", help="skip if not installed")
    parser.add_argument("--json", type=Path, help="write the rows for run_all.py here")
    args = parser.parse_args()

    # run_all.py ends a benchmark past its time with SIGTERM: leave through the cleanup below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM: cleaning up"))
    rows: list[dict[str, str]] = []

    def emit(figure: str, value: str, baseline: str = "", ratio: str = "") -> None:
        rows.append({"figure": figure, "value": value, "baseline": baseline, "ratio": ratio})
        print(f"{figure}: {value}" + (f" | Label Studio {baseline} | {ratio}" if baseline else ""))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))

    print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    if not installed():
        if args.no_install:
            emit(f"Label Studio {VERSION}", f"skipped: {VENV} is absent and --no-install given")
            return 0
        emit(f"Label Studio {VERSION}: install", f"{install():.0f} s from PyPI into {VENV}")

    base_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord")
    ls_url, concord_url = database_url(base_url, "_ls"), database_url(base_url, "_lsc")
    for url in (ls_url, concord_url):
        if urlparse(url).hostname not in ("127.0.0.1", "localhost"):
            raise SystemExit(f"DATABASE_URL must be on this machine (loopback), not {url}")
    # bench_claim sets Django up on BENCH_DATABASE_URL when it is imported.
    os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"] = concord_url
    os.environ["SECRET_KEY"] = "bench-" + uuid.uuid4().hex * 2
    recreate(concord_url)
    recreate(ls_url)
    logs = Path(os.environ.get("CONCORD_VAR_DIR", ROOT / "var")) / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="label-studio-bench-"))
    env = label_studio_env(ls_url, data_dir)
    server: LabelStudioServer | None = None
    try:
        from django.core.management import call_command

        import benchmarks.bench_claim as claim_bench
        from benchmarks.bench_http import measure

        call_command("migrate", verbosity=0)
        began = time.perf_counter()
        study = claim_bench.make_study(args.tasks)
        print(f"Concord: study of {args.tasks:,} pairs in {time.perf_counter() - began:.1f} s")
        made = side(env, "setup", "--annotators", str(args.annotators))
        print(f"Label Studio: migrated in {made['migrate_s']:.0f} s, accounts made", flush=True)
        server = LabelStudioServer(
            env=env, workers=args.server_workers, log=logs / "label-studio-gunicorn.log"
        )
        server.wait(timeout=300)
        project, import_s = make_project(
            server.base, made["owner"], tasks=args.tasks, sampling=args.sampling,
            batch=args.import_batch,
        )  # fmt: skip
        emit(
            f"Label Studio {VERSION}: import {args.tasks:,} tasks over its API",
            f"{import_s:.0f} s ({args.tasks / import_s:,.0f} tasks/s)",
        )

        loads = [os.getloadavg()[0]]
        ours_runs, theirs_runs = [], []
        # Rounds alternate the two, so that a change in the machine's load falls on both.
        for index in range(args.rounds):
            ours_runs.append(
                measure(
                    study,
                    args.annotators,
                    seconds=args.seconds,
                    max_cycles=args.max_cycles,
                    server_workers=args.server_workers,
                    conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "600")),
                    tag=f"ls-compare-{index}",
                    log=logs / f"gunicorn-ls-compare-{index}.log",
                )  # fmt: skip
            )
            loads.append(os.getloadavg()[0])
            # Warm each of Label Studio's workers as measure() warms Concord's.
            run_label_studio(server.base, project, made["annotators"][:1], 1.0, args.server_workers)
            theirs_runs.append(
                run_label_studio(
                    server.base, project, made["annotators"], args.seconds, args.max_cycles
                )
            )
            loads.append(os.getloadavg()[0])
            print(
                f"round {index + 1}: Concord {ours_runs[-1].per_second:.2f} cycles/s, Label "
                f"Studio {theirs_runs[-1].per_second:.2f}, load average {loads[-1]:.1f}",
                flush=True,
            )
        ours, theirs = combined(ours_runs), combined(theirs_runs)
        ours.invariants = ours_runs[-1].invariants
        with psycopg.connect(ls_url) as conn:
            theirs.invariants = label_studio_invariants(conn, project, 3)
        a, b = ours.summary(), theirs.summary()
        print("Concord:      " + load_text(a))
        print("Label Studio: " + load_text(b))
        emit(
            f"vs Label Studio {VERSION}: {args.annotators} annotators next+submit, "
            f"{args.tasks:,} tasks, overlap 3, {args.rounds} x {args.seconds:.0f} s each",
            load_text(a),
            load_text(b),
            f"{a['cycles_per_s'] / b['cycles_per_s']:.1f}x the cycles/s"
            if b["cycles_per_s"]
            else "",
        )
        emit(
            "vs Label Studio: load average before and after each window (Concord, LS, ...)",
            " -> ".join(f"{x:.1f}" for x in loads),
        )

        if args.export_per_task:
            filled = side(
                env, "fill", "--project", str(project), "--per-task", str(args.export_per_task),
                "--result", json.dumps(RESULT),
            )  # fmt: skip
            count = annotation_count(ls_url, project)
            print(
                f"Label Studio: {filled['written']:,} annotations added in {filled['fill_s']:.0f} s"
            )
            ls_s, ls_bytes = export_label_studio(server.base, made["owner"], project)
            claim_bench.drop_study(study)
            # The filler writes 4 judgments per pair: the nearest multiple of 4 (at most 2 off).
            judgments = max(4, round(count / 4) * 4)
            for fmt, seconds, size in export_concord(judgments):
                emit(
                    f"vs Label Studio: export of {count:,} annotations ({args.tasks:,} tasks)",
                    f"{seconds:.2f} s {fmt.upper()}, {judgments:,} judgments ({size / 1e6:.1f} MB)",
                    f"{ls_s:.1f} s JSON snapshot + download ({ls_bytes / 1e6:.1f} MB)",
                    f"{ls_s / seconds:.1f}x faster",
                )
    finally:
        if server is not None:
            server.stop()
        from django.db import connections

        connections.close_all()
        recreate(concord_url, drop_only=True)
        recreate(ls_url, drop_only=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    violated = any(
        r.invariants.get(k, 0)
        for r in (ours, theirs)
        for k in ("pairs_over_overlap", "worker_twice_on_a_pair")
    )
    return 1 if violated else 0


if __name__ == "__main__":
    sys.exit(main())
