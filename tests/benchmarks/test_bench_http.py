"""bench_http's CPU meter: the server's processes, the benchmark database's backends, the client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection

from benchmarks.bench_http import CpuMeter, LoadClient, LoadResult, RequestFailed, cpu_text

# Spins for 0.3 s of CPU after a line on stdin, then says so and waits for another line.
SPIN = (
    "import sys, time\n"
    "sys.stdin.readline()\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 0.3: pass\n"
    "print('done', flush=True)\n"
    "sys.stdin.readline()\n"
)


@pytest.mark.django_db
def test_the_meter_counts_the_servers_the_databases_and_the_clients_cpu() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")  # the backend is connected before the meter starts
        meter = CpuMeter(server.pid, str(connection.settings_dict["NAME"]))
        meter.start()
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("go\n")
        server.stdin.flush()
        assert server.stdout.readline().strip() == "done"
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM generate_series(1, 2000000)")
        spent = meter.stop()
    finally:
        server.kill()
        server.wait()
    assert set(spent) == {"server", "database", "client"}
    assert 0.25 <= spent["server"] < 1.5
    assert 0.02 <= spent["database"] < 5
    assert 0 <= spent["client"] < 5


def test_the_cpu_per_cycle_is_reported_beside_the_cycles() -> None:
    result = LoadResult(annotators=8, seconds=10.0, cycles=1000, errors=0)
    result.cpu_seconds = {"server": 6.8, "database": 3.5, "client": 3.2}
    summary = result.summary()
    assert summary["cpu_ms_per_cycle"] == pytest.approx(
        {"server": 6.8, "database": 3.5, "client": 3.2}
    )
    assert cpu_text(summary) == (", 13.5 ms CPU per cycle (server 6.8, database 3.5, client 3.2)")
    assert cpu_text(LoadResult(annotators=1, seconds=1.0, cycles=0, errors=0).summary()) == ""


# A gunicorn worker recycled mid-run: it exists when the meter starts, spins for 0.4 s of CPU and
# exits before the meter stops (the parent, the "arbiter", stays).
RECYCLED = (
    "import subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import sys, time\\nsys.stdin.readline()\\nt = time.process_time()\\n"
    "while time.process_time() - t < 0.4: pass\\n'], stdin=subprocess.PIPE, text=True)\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "child.stdin.write('go\\n'); child.stdin.flush(); child.wait()\n"
    "print('done', flush=True)\n"
    "sys.stdin.readline()\n"
)


@pytest.mark.django_db
def test_the_meter_keeps_the_cpu_of_a_worker_that_exits_during_the_run() -> None:
    # Read only at the ends, the worker's 0.4 s were lost: it is gone by the last reading.
    server = subprocess.Popen(
        [sys.executable, "-c", RECYCLED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdin is not None and server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        meter = CpuMeter(server.pid, str(connection.settings_dict["NAME"]), interval=0.05)
        meter.start()
        server.stdin.write("go\n")
        server.stdin.flush()
        assert server.stdout.readline().strip() == "done"
        spent = meter.stop()
    finally:
        server.kill()
        server.wait()
    assert 0.3 <= spent["server"] < 1.5


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Recorder.seen.append(
            {"path": self.path, "cookie": self.headers["Cookie"], "body": json.loads(body),
             "csrf": self.headers["X-CSRFToken"]}
        )  # fmt: skip
        reply = json.dumps({"status": "item"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_load_client_sends_the_sessions_cookies_headers_and_json() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    async def post() -> tuple[int, Any]:
        client = LoadClient(
            base_url=base,
            headers={"X-CSRFToken": "t0k"},
            cookies={"sessionid": "abc", "csrftoken": "t0k"},
        )
        try:
            reply = await client.post("/work/s/api/next/", json={"likert": 3})
        finally:
            await client.aclose()
        return reply.status_code, reply.json()

    try:
        assert asyncio.run(post()) == (201, {"status": "item"})
    finally:
        server.shutdown()
        server.server_close()
    assert Recorder.seen == [
        {"path": "/work/s/api/next/", "cookie": "sessionid=abc; csrftoken=t0k",
         "body": {"likert": 3}, "csrf": "t0k"}
    ]  # fmt: skip


def test_a_refused_connection_is_an_error_of_the_run_not_its_end() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    port = server.server_address[1]
    server.server_close()  # nothing listens there now

    async def get() -> None:
        client = LoadClient(base_url=f"http://127.0.0.1:{port}")
        try:
            await client.get("/api/projects/1/next/")
        finally:
            await client.aclose()

    with pytest.raises(RequestFailed, match="GET /api/projects/1/next/"):
        asyncio.run(get())
