"""bench_http's CPU meter: the server's processes, the benchmark database's backends, the client."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import connection

from benchmarks.bench_http import CpuMeter, LoadResult, cpu_text

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
