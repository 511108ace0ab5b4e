"""Annotators over HTTP: next + submit cycles against gunicorn, with the invariants checked after.

Run from the repository root with DATABASE_URL pointing at a PostgreSQL server and
CELERY_BROKER_URL at a Redis (loopback only):

    .venv/bin/python benchmarks/bench_http.py --pairs 10000 --annotators 1 8 50 200 --seconds 20

It works in a database of its own (DATABASE_URL's name + "_http"), created and migrated, with a
live study of `--pairs` pairs and overlap 3 (built as benchmarks/bench_claim.py builds one), and
drops it at the end. For each count of annotators it starts gunicorn as the container does
(`docker/gunicorn.conf.py`, the production settings in their plain-HTTP trial form,
`--server-workers` sync workers), makes that many annotators (a user, a worker who consented and
a session each: what the entry link does), and runs one asyncio task per annotator with its own
aiohttp client (LoadClient): POST /work/<slug>/api/next/, then POST .../submit/ with a Likert
score, until the time is up, the cycle budget is spent or the study has nothing left. It reports
cycles per second (one cycle = next + submit = one judgment), p50/p95/p99 of each request,
errors, and checks the invariants in the database: no pair judged by more than `overlap` workers,
nobody twice on a pair, one judgment per submitted assignment, and, when the study ran out,
every pair judged by exactly `overlap` distinct workers. It also reports the CPU time of a cycle,
summed over the gunicorn processes, the benchmark database's PostgreSQL backends and the load
client (CpuMeter): unlike cycles/s, that figure hardly moves with what else the machine is running.
`--baseline-conn-max-age 0` repeats the 8-annotator run with a new database connection per
request, the setting's former default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest-rank method; 0 when there is no value."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass
class LoadResult:
    """What one run of `annotators` concurrent annotators did."""

    annotators: int
    seconds: float
    cycles: int
    errors: int
    next_ms: list[float] = field(default_factory=list, repr=False)
    submit_ms: list[float] = field(default_factory=list, repr=False)
    exhausted: int = 0
    invariants: dict[str, int] = field(default_factory=dict)
    # CPU seconds spent during the run by the server's processes, the database's backends for
    # this benchmark and the load client (CpuMeter): per cycle, they do not depend on what else
    # the machine runs as cycles/s do.
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def per_second(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        del out["next_ms"], out["submit_ms"]
        cycle = [n + s for n, s in zip(self.next_ms, self.submit_ms, strict=False)]
        out |= {
            "cycles_per_s": self.per_second,
            "next_p50_ms": percentile(self.next_ms, 50),
            "next_p95_ms": percentile(self.next_ms, 95),
            "next_p99_ms": percentile(self.next_ms, 99),
            "submit_p50_ms": percentile(self.submit_ms, 50),
            "submit_p95_ms": percentile(self.submit_ms, 95),
            "submit_p99_ms": percentile(self.submit_ms, 99),
            "cycle_p50_ms": percentile(cycle, 50),
            "cycle_p99_ms": percentile(cycle, 99),
            "cpu_ms_per_cycle": {
                name: seconds * 1000 / self.cycles for name, seconds in self.cpu_seconds.items()
            }
            if self.cycles
            else {},
        }
        return out


class CpuMeter:
    """CPU seconds (user + system) that the server (a process and its children), the PostgreSQL
    backends connected to `database` and this process (the load client) spend between start()
    and stop().

    The processes are read every `interval` seconds in a thread, not only at the ends: gunicorn
    recycles a worker after about 2,000 requests and its database connection goes with it, so at
    100 cycles/s a 20 s run outlives some of them. A process is counted from its first reading
    (0 for one born during the run) to its last, so at most `interval` of a dying one's CPU is
    missed, where reading only at the ends lost all of it.
    """

    def __init__(self, server_pid: int, database: str, interval: float = 0.5) -> None:
        import psutil

        self.psutil = psutil
        self.server = psutil.Process(server_pid)
        self.database = database
        self.interval = interval
        self.first: dict[int, tuple[str, float]] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.client_began = 0.0
        # The polling thread's own CPU, which is not the load client's.
        self.meter_seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _readings(self) -> dict[int, tuple[str, float]]:
        psutil = self.psutil
        try:
            children = self.server.children(True)
        except psutil.Error:
            children = []
        processes = [("server", self.server), *(("server", c) for c in children)]
        for process in psutil.process_iter(["cmdline"]):
            # A backend's title: "postgres: <cluster>: <user> <database> <client> <state>".
            title = " ".join(process.info["cmdline"] or [])
            if title.startswith("postgres:") and f" {self.database} " in f"{title} ":
                processes.append(("database", process))
        readings = {}
        for kind, process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            readings[process.pid] = (kind, times.user + times.system)
        return readings

    def _poll(self) -> None:
        began = time.thread_time()
        while not self._stop.wait(self.interval):
            self._record(self._readings())
        self.meter_seconds = time.thread_time() - began

    def _record(self, readings: dict[int, tuple[str, float]]) -> None:
        for pid, reading in readings.items():
            # Born since start(): everything it spent belongs to the run.
            self.first.setdefault(pid, (reading[0], 0.0))
        self.last.update(readings)

    def start(self) -> None:
        self.first = self._readings()
        self.last = dict(self.first)
        self.client_began = time.process_time()
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._record(self._readings())
        client = time.process_time() - self.client_began - self.meter_seconds
        spent = {"server": 0.0, "database": 0.0}
        for pid, (kind, seconds) in self.last.items():
            spent[kind] += seconds - self.first[pid][1]
        return spent | {"client": client}


def make_annotators(study: Any, count: int, tag: str) -> list[tuple[str, str]]:
    """`count` workers who entered and consented, each with a logged-in session: (session key,
    CSRF token) pairs for their HTTP clients."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.utils import timezone

    from annotation.models import Worker

    out = []
    now = timezone.now()
    for i in range(count):
        user = User.objects.create_user(username=f"{tag}-{i}-{uuid.uuid4().hex[:8]}")
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "core.auth.AccountBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        Worker.objects.create(
            study=study,
            user=user,
            panel=Worker.Panel.DEMO,
            external_id=user.username,
            session_key=str(session.session_key),
            consented_at=now,
            last_seen_at=now,
        )
        out.append((str(session.session_key), uuid.uuid4().hex))
    return out


class RequestFailed(Exception):
    """A next or submit request that was not answered as it should be (counted as an error)."""


async def annotator_loop(
    client: Any,
    next_item: Callable[[Any], Awaitable[Any | None]],
    submit: Callable[[Any, Any], Awaitable[None]],
    deadline: float,
    budget: list[int],
    result: LoadResult,
) -> None:
    """One annotator: `next_item` (None when nothing is left), then `submit` it, until the
    deadline passes, the shared cycle budget is spent or the work runs out. Only whole cycles
    count; a failed request is an error (the first one is printed) and the loop goes on."""
    while time.monotonic() < deadline and budget[0] > 0:
        budget[0] -= 1
        began = time.perf_counter()
        try:
            item = await next_item(client)
            after_next = time.perf_counter()
            if item is None:
                result.exhausted += 1
                return
            await submit(client, item)
        except RequestFailed as exc:
            result.errors += 1
            if result.errors == 1:
                print(f"  first error: {exc}")
            continue
        done = time.perf_counter()
        result.cycles += 1
        result.next_ms.append((after_next - began) * 1000)
        result.submit_ms.append((done - after_next) * 1000)


class Reply:
    """A response as the loops read it: status, body text and its JSON."""

    __slots__ = ("status_code", "text")

    def __init__(self, status_code: int, text: str) -> None:
        self.status_code, self.text = status_code, text

    def json(self) -> Any:
        return json.loads(self.text)


class LoadClient:
    """One annotator's HTTP client: GET and POST on one server with fixed headers and cookies.

    Built on aiohttp, whose HTTP parser is compiled: on these 2 cores the load client shares the
    CPU with the server it measures, and httpx (pure-Python h11) spent 4.4 ms of CPU per
    next + submit cycle, a fifth of the cycle's whole CPU, against 1.4-1.8 ms for this client.
    Cookies go as a plain Cookie header: the sessions are made in advance and nothing in the loop
    sets one.
    """

    def __init__(
        self,
        *,
        base_url: str,
        headers: dict[str, str] | None = None,
        cookies: dict[str, str] | None = None,
    ) -> None:
        import aiohttp

        fixed = dict(headers or {})
        if cookies:
            fixed["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        self.base = base_url.rstrip("/")
        # A refused, reset or timed-out request is an error of the run, not its end.
        self.failures = (aiohttp.ClientError, TimeoutError)
        self.session = aiohttp.ClientSession(
            headers=fixed,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=60),
        )

    async def _send(self, method: str, path: str, body: Any = None) -> Reply:
        try:
            async with self.session.request(method, self.base + path, json=body) as response:
                return Reply(response.status, await response.text())
        except self.failures as exc:
            raise RequestFailed(f"{method} {path}: {type(exc).__name__} {exc}") from exc

    async def get(self, path: str) -> Reply:
        return await self._send("GET", path)

    async def post(self, path: str, json: Any = None) -> Reply:
        return await self._send("POST", path, json)

    async def aclose(self) -> None:
        await self.session.close()


def run_annotators(
    clients: list[dict[str, Any]],
    next_item: Callable[[Any], Awaitable[Any | None]],
    submit: Callable[[Any, Any], Awaitable[None]],
    seconds: float,
    max_cycles: int,
) -> LoadResult:
    """Every annotator (one LoadClient made from each dict of keyword arguments) loops at once
    until the time or the cycles are spent. The clients are built before the clock starts."""
    result = LoadResult(annotators=len(clients), seconds=0.0, cycles=0, errors=0)
    budget = [max_cycles]

    async def main() -> None:
        made = [LoadClient(**kwargs) for kwargs in clients]
        began = time.perf_counter()
        deadline = time.monotonic() + seconds
        try:
            await asyncio.gather(
                *(annotator_loop(c, next_item, submit, deadline, budget, result) for c in made)
            )
        finally:
            result.seconds = time.perf_counter() - began
            for client in made:
                await client.aclose()

    asyncio.run(main())
    return result


def run_load(
    base: str, slug: str, sessions: list[tuple[str, str]], seconds: float, max_cycles: int
) -> LoadResult:
    """Concord's annotators: POST /work/<slug>/api/next/, then .../items/<id>/submit/ with a
    random Likert score."""

    async def next_item(client: Any) -> Any | None:
        response = await client.post(f"/work/{slug}/api/next/")
        if response.status_code != 200:
            raise RequestFailed(f"next {response.status_code} {response.text[:200]}")
        body = response.json()
        return body["item"]["id"] if body["status"] == "item" else None

    async def submit(client: Any, item: Any) -> None:
        response = await client.post(
            f"/work/{slug}/api/items/{item}/submit/",
            json={"submission_id": str(uuid.uuid4()), "likert": random.randint(1, 8)},
        )
        if response.status_code != 201:
            raise RequestFailed(f"submit {response.status_code} {response.text[:200]}")

    clients = [
        {
            "base_url": base,
            "cookies": {"sessionid": key, "csrftoken": csrf},
            "headers": {"X-CSRFToken": csrf},
        }
        for key, csrf in sessions
    ]
    return run_annotators(clients, next_item, submit, seconds, max_cycles)


def invariants(study: Any) -> dict[str, int]:
    """Counts of what must never happen (all zero), and how many pairs are complete."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT
              count(*) FILTER (WHERE judgments > %(overlap)s),
              count(*) FILTER (WHERE workers <> judgments),
              count(*) FILTER (WHERE workers = %(overlap)s),
              (SELECT count(*) FROM annotation_pair WHERE study_id = %(study)s)
            FROM (
              SELECT pair_id, count(*) AS judgments, count(DISTINCT worker_id) AS workers
              FROM annotation_humanjudgment WHERE study_id = %(study)s GROUP BY pair_id
            ) per_pair
            """,
            {"study": study.pk, "overlap": study.overlap},
        )
        over, twice, complete, pairs = cursor.fetchone()
        cursor.execute(
            """
            SELECT
              (SELECT count(*) FROM annotation_assignment
                WHERE study_id = %(study)s AND status = 'submitted')
              - (SELECT count(*) FROM annotation_humanjudgment WHERE study_id = %(study)s),
              (SELECT count(*) FROM (
                 SELECT pair_id FROM annotation_assignment
                 WHERE study_id = %(study)s
                   AND (status = 'submitted' OR (status = 'reserved' AND expires_at > now()))
                 GROUP BY pair_id HAVING count(*) > %(overlap)s) t)
            """,
            {"study": study.pk, "overlap": study.overlap},
        )
        unmatched, over_assigned = cursor.fetchone()
    return {
        "pairs_over_overlap": int(over),
        "worker_twice_on_a_pair": int(twice),
        "submitted_without_judgment": int(unmatched),
        "pairs_over_assigned": int(over_assigned),
        "pairs_complete": int(complete),
        "pairs": int(pairs),
    }


class GunicornProcess:
    """A gunicorn that a benchmark starts on a free loopback port: its ready check and its stop."""

    ready_path = "/readyz"
    process: subprocess.Popen[bytes]

    def __init__(self, log: Path) -> None:
        from tests.config.django_process import free_port

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log.open("w")

    def start(self, command: list[str], *, env: dict[str, str], cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )

    def wait(self, timeout: float = 90) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {self.log.name}")
            try:
                if httpx.get(self.base + self.ready_path, timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"gunicorn did not get ready in {timeout} s; see {self.log.name}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


class Server(GunicornProcess):
    """gunicorn as the web container runs it, on a free loopback port."""

    def __init__(self, *, workers: int, conn_max_age: int, log: Path) -> None:
        super().__init__(log)
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings.production",
            DJANGO_DEBUG="false",
            ALLOWED_HOSTS="127.0.0.1",
            SECURE_SSL_REDIRECT="false",
            SECURE_COOKIES="false",
            SECURE_HSTS_SECONDS="0",
            DATABASE_CONN_MAX_AGE=str(conn_max_age),
            GUNICORN_BIND=f"127.0.0.1:{self.port}",
            GUNICORN_WORKERS=str(workers),
            GUNICORN_ACCESS_LOG="",
        )
        self.start(
            [sys.executable, "-m", "gunicorn", "--config", "docker/gunicorn.conf.py",
             "config.wsgi:application"],
            env=env, cwd=ROOT,
        )  # fmt: skip


def measure(
    study: Any,
    count: int,
    *,
    seconds: float,
    max_cycles: int,
    server_workers: int,
    conn_max_age: int,
    tag: str,
    log: Path,
) -> LoadResult:
    """One run: a fresh server, `count` new annotators, the load, then the invariants."""
    sessions = make_annotators(study, count, tag)
    server = Server(workers=server_workers, conn_max_age=conn_max_age, log=log)
    try:
        server.wait()
        # Warm each server worker up (its first request imports the annotator's views).
        run_load(server.base, study.slug, sessions[: 2 * server_workers], 1.0, 2 * server_workers)
        meter = CpuMeter(server.process.pid, database_name())
        meter.start()
        result = run_load(server.base, study.slug, sessions, seconds, max_cycles)
        result.cpu_seconds = meter.stop()
    finally:
        server.stop()
    result.invariants = invariants(study)
    return result


def database_name() -> str:
    from django.db import connection

    return str(connection.settings_dict["NAME"])


def format_result(label: str, r: dict[str, Any]) -> str:
    inv = r["invariants"]
    bad = sum(v for k, v in inv.items() if k not in ("pairs_complete", "pairs"))
    return (
        f"{label:<28} {r['annotators']:>4} {r['cycles']:>7} {r['cycles_per_s']:>8.1f} "
        f"{r['next_p50_ms']:>6.0f} {r['next_p95_ms']:>6.0f} {r['next_p99_ms']:>6.0f} "
        f"{r['cycle_p50_ms']:>6.0f} {r['cycle_p99_ms']:>6.0f} {r['errors']:>5} "
        f"{'ok' if bad == 0 else 'VIOLATED'} ({inv['pairs_complete']}/{inv['pairs']} complete)"
        f"{cpu_text(r)}"
    )


def cpu_text(r: dict[str, Any]) -> str:
    """', 13.8 ms CPU per cycle (server 6.8, database 3.5, client 3.2)', or '' without one."""
    cpu = r.get("cpu_ms_per_cycle") or {}
    if not cpu:
        return ""
    parts = ", ".join(f"{name} {ms:.1f}" for name, ms in cpu.items())
    return f", {sum(cpu.values()):.1f} ms CPU per cycle ({parts})"


def main() -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--annotators", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seconds", type=float, default=20.0, help="per run")
    parser.add_argument("--max-cycles", type=int, default=100_000, help="per run")
    parser.add_argument("--server-workers", type=int, default=4)
    parser.add_argument(
        "--baseline-conn-max-age",
        type=int,
        default=None,
        help="repeat the 8-annotator run (or the largest below it) with this CONN_MAX_AGE",
    )
    parser.add_argument(
        "--fresh-study-per-run",
        action="store_true",
        help="each count of annotators starts on a new study (for the exhaustion invariants)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from benchmarks.bench_report import bench_database_url, recreate_database

    url, name = bench_database_url(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord")
    )
    url, name = url.removesuffix("_bench") + "_http", name.removesuffix("_bench") + "_http"
    os.environ["DATABASE_URL"] = url
    os.environ["BENCH_DATABASE_URL"] = url
    # One key for the sessions made here and the server that checks them.
    os.environ["SECRET_KEY"] = "bench-" + uuid.uuid4().hex * 2
    recreate_database(url, name)
    logs = Path(os.environ.get("CONCORD_VAR_DIR", ROOT / "var")) / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    try:
        # bench_claim sets Django up on the database named above and builds studies with SQL.
        from django.core.management import call_command

        import benchmarks.bench_claim as claim_bench

        call_command("migrate", verbosity=0)
        study = None
        print(
            f"{'run':<28} {'ann':>4} {'cycles':>7} {'cyc/s':>8} {'next50':>6} {'next95':>6} "
            f"{'next99':>6} {'cyc50':>6} {'cyc99':>6} {'err':>5} invariants"
        )
        runs: list[tuple[str, int, int]] = [
            (f"{n} annotators", n, int(os.environ.get("DATABASE_CONN_MAX_AGE", "600")))
            for n in args.annotators
        ]
        if args.baseline_conn_max_age is not None:
            small = [n for n in args.annotators if n <= 8] or args.annotators[:1]
            n = max(small)
            runs.append(
                (
                    f"{n} ann., CONN_MAX_AGE={args.baseline_conn_max_age}",
                    n,
                    args.baseline_conn_max_age,
                )
            )
        for index, (label, count, max_age) in enumerate(runs):
            if study is None or args.fresh_study_per_run:
                if study is not None:
                    claim_bench.drop_study(study)
                study = claim_bench.make_study(args.pairs)
            r = measure(
                study,
                count,
                seconds=args.seconds,
                max_cycles=args.max_cycles,
                server_workers=args.server_workers,
                conn_max_age=max_age,
                tag=f"run{index}",
                log=logs / f"gunicorn-{count}-annotators-{index}.log",
            )
            summary = r.summary() | {"label": label, "pairs_in_study": args.pairs}
            results.append(summary)
            print(format_result(label, summary), flush=True)
        # The last study goes with the database below (deleting a 1M-pair study row by row
        # took minutes).
    finally:
        from django.db import connections

        connections.close_all()
        recreate_database(url, name, drop_only=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    violated = any(
        v
        for r in results
        for k, v in r["invariants"].items()
        if k not in ("pairs_complete", "pairs")
    )
    return 1 if violated else 0


if __name__ == "__main__":
    sys.exit(main())
