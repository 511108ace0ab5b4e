"""`make bench`: every performance figure of the project in one table, each beside its baseline.

Runs each benchmark of this folder in a process of its own, in sequence, on loopback only
(PostgreSQL from DATABASE_URL, Redis from CELERY_BROKER_URL / REDIS_URL), each in databases of
its own that it drops at the end, with a time limit per benchmark; then prints one table: the
figure, Concord's value, the baseline measured in the same run, and their ratio. A benchmark that
fails or times out is a row saying so, with its last line of output.

    make bench            # the sizes in the docs (minutes)
    make bench QUICK=1    # small sizes, for a shared or slow machine (a few minutes)

Label Studio 1.23.2 is installed from PyPI into `var/label-studio-venv` the first time (minutes),
unless `--no-install`, which skips it when absent (see docs/benchmarks.md).

    .venv/bin/python benchmarks/run_all.py --only ls    # Concord beside Label Studio only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
sys.path.insert(0, str(ROOT))

from benchmarks.bench_http import cpu_text  # noqa: E402


@dataclass(frozen=True)
class Row:
    figure: str
    value: str
    baseline: str = ""
    ratio: str = ""


def _run(args: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str]:
    """Run one benchmark in a process group of its own; past `timeout`, SIGTERM to the group
    (a benchmark cleans up on it: its servers, its databases), SIGKILL 60 s later."""
    began = time.perf_counter()
    process = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = process.communicate(timeout=timeout)
        code = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            out, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, _ = process.communicate()
        out, code = (out or "") + f"\n(timed out after {timeout:.0f} s)", 124
    took = time.perf_counter() - began
    print(f"  {Path(args[1]).name}: {took:.0f} s, rc {code}", flush=True)
    return code, out


def _last_line(out: str) -> str:
    lines = [line for line in out.strip().splitlines() if line.strip()]
    return lines[-1][:90] if lines else "(no output)"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else ""


def _http_runs(
    extra: list[str], timeout: float, env: dict[str, str]
) -> tuple[dict[str, dict], str]:
    """One bench_http.py invocation: its runs by label (empty when it failed), and why not."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        path = Path(handle.name)
    code, out = _run([PY, "benchmarks/bench_http.py", "--json", str(path), *extra], timeout, env)
    text = path.read_text() if path.exists() else ""
    path.unlink(missing_ok=True)
    if not text:
        return {}, f"failed (rc {code}): {_last_line(out)}"
    return {r["label"]: r for r in json.loads(text)}, ""


def _http_value(r: dict) -> str:
    bad = sum(v for k, v in r["invariants"].items() if k not in ("pairs_complete", "pairs"))
    return (
        f"{r['cycles_per_s']:.1f} cycles/s, next p50/p95/p99 {r['next_p50_ms']:.0f}/"
        f"{r['next_p95_ms']:.0f}/{r['next_p99_ms']:.0f} ms, {r['errors']} errors, "
        f"invariants {'ok' if not bad else 'VIOLATED'}{cpu_text(r)}"
    )


# The full mode also runs 8 annotators on a 1M-pair study (built with SQL in about 200 s), in a
# second invocation, and compares it with the 8-annotator run at 100k: a cycle should not slow
# down with the study's size (the claim walks a bounded window of an index).
HTTP_LARGE_PAIRS = 1_000_000


def http_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    runs, failed = _http_runs(
        ["--baseline-conn-max-age", "0"]
        + (
            ["--pairs", "2000", "--annotators", "1", "8", "--seconds", "10"]
            if quick
            else ["--pairs", "100000", "--annotators", "1", "8", "--seconds", "30"]
        ),
        timeout,
        env,
    )
    if failed:
        return [Row("next + submit cycles over HTTP", failed)]
    rows = []
    baseline = next((r for label, r in runs.items() if "CONN_MAX_AGE" in label), None)
    for label, r in runs.items():
        if "CONN_MAX_AGE" in label:
            continue
        row = Row(f"HTTP next+submit, {label}, {r['pairs_in_study']:,} pairs", _http_value(r))
        if baseline is not None and baseline["annotators"] == r["annotators"]:
            row = Row(
                row.figure,
                row.value,
                f"{baseline['cycles_per_s']:.1f} cycles/s with a connection per request",
                _ratio(r["cycles_per_s"], baseline["cycles_per_s"]),
            )
        rows.append(row)
    if quick:
        return rows
    figure = f"HTTP next+submit, 8 annotators, {HTTP_LARGE_PAIRS:,} pairs"
    large, failed = _http_runs(
        ["--pairs", str(HTTP_LARGE_PAIRS), "--annotators", "8", "--seconds", "30"], timeout, env
    )
    if failed:
        return [*rows, Row(figure, failed)]
    r = large["8 annotators"]
    small = runs.get("8 annotators")
    rows.append(
        Row(
            figure,
            _http_value(r),
            f"{small['cycles_per_s']:.1f} cycles/s at {small['pairs_in_study']:,} pairs"
            if small
            else "",
            _ratio(r["cycles_per_s"], small["cycles_per_s"]) if small else "",
        )
    )
    return rows


def load_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        path = Path(handle.name)
    pairs = "1000" if quick else "10000"
    seconds = "25" if quick else "120"
    args = [
        PY,
        "benchmarks/bench_http.py",
        "--json",
        str(path),
        "--pairs",
        pairs,
        "--annotators",
        "50",
        "200",
        "--seconds",
        seconds,
        "--fresh-study-per-run",
    ]
    code, out = _run(args, timeout, env)
    if not path.exists() or not path.read_text():
        return [Row("load beyond 8 annotators", f"failed (rc {code}): {_last_line(out)}")]
    rows = []
    for r in json.loads(path.read_text()):
        inv = r["invariants"]
        bad = sum(v for k, v in inv.items() if k not in ("pairs_complete", "pairs"))
        rows.append(
            Row(
                f"load: {r['annotators']} annotators, {r['pairs_in_study']:,} pairs, overlap 3",
                f"{r['cycles_per_s']:.1f} judgments/s, cycle p50 {r['cycle_p50_ms']:.0f} ms, "
                f"p99 {r['cycle_p99_ms']:.0f} ms, {r['errors']} errors, "
                f"{inv['pairs_complete']}/{inv['pairs']} pairs at 3 workers, "
                f"invariants {'ok' if not bad else 'VIOLATED: ' + json.dumps(inv)}",
            )
        )
    path.unlink()
    return rows


def claim_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    url = env["DATABASE_URL"].rsplit("/", 1)[0] + "/" + _db_name(env) + "_claim"
    args = [PY, "benchmarks/bench_claim.py"]
    args += (
        ["--sizes", "20000", "--workers", "8", "--seconds", "3"]
        if quick
        else ["--sizes", "100000", "1000000", "--workers", "8", "32", "--seconds", "5"]
    )
    code, out = _run(args, timeout, env | {"BENCH_DATABASE_URL": url})
    _drop(url)
    rows = []
    for size, workers, engine, raw, _ratio_text in re.findall(
        r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", out, re.M
    ):
        rows.append(
            Row(
                f"claim engine, {int(size):,} pairs, {workers} threads",
                f"{float(engine):.0f} claims/s",
                f"{float(raw):.0f} claims/s one-statement raw SQL",
                _ratio(float(engine), float(raw)),
            )
        )
    return rows or [Row("claim engine vs raw SQL", f"failed (rc {code}): {_last_line(out)}")]


def export_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        path = Path(handle.name)
    sizes = (
        ["--judgments", "60000", "--calls", "20000"]
        if quick
        else ["--judgments", "300000", "--calls", "300000"]
    )
    args = [PY, "benchmarks/bench_export.py", "--json", str(path), "--command", *sizes]
    code, out = _run(args, timeout, env)
    if not path.exists() or not path.read_text():
        return [Row("exports", f"failed (rc {code}): {_last_line(out)}")]
    rows = []
    for r in json.loads(path.read_text()):
        if r.get("via") == "export_study":
            rows.append(
                Row(
                    f"export_study {r['table']} {r['format']}, {r['rows']:,} rows",
                    f"{r['process_mb']:.0f} MB peak resident, {r['seconds']:.2f} s",
                    f"{r['idle_process_mb']:.0f} MB for Django alone",
                )
            )
            continue
        base = (
            f"{r['baseline_seconds']:.2f} s, {r['baseline_peak_mb']:.0f} MB in memory"
            if "baseline_seconds" in r
            else r.get("baseline_error", "")[:60]
        )
        rows.append(
            Row(
                f"export {r['table']} {r['format']}, {r['rows']:,} rows",
                f"{r['seconds']:.2f} s, {r['peak_mb']:.0f} MB peak",
                base,
                _ratio(r.get("baseline_seconds", 0.0), r["seconds"]) + " faster"
                if "baseline_seconds" in r
                else "",
            )
        )
    path.unlink()
    return rows


def web_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    code, out = _run([PY, "benchmarks/bench_web.py"], timeout, env)
    found = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            found[r["mode"]] = r
    if set(found) != {"lean", "eager"}:
        return [Row("web worker start", f"failed (rc {code}): {_last_line(out)}")]
    lean, eager = found["lean"], found["eager"]
    return [
        Row(
            "web worker: first request after boot",
            f"{lean['first_request_s']:.2f} s (boot {lean['boot_s']:.1f} s)",
            f"{eager['first_request_s']:.2f} s (boot {eager['boot_s']:.1f} s) importing analysis",
            _ratio(
                eager["boot_s"] + eager["first_request_s"], lean["boot_s"] + lean["first_request_s"]
            )
            + " faster to serve",
        ),
        Row(
            "web worker: resident memory",
            f"{lean['rss_mb']:.0f} MB, heavy libraries: {lean['heavy'] or 'none'}",
            f"{eager['rss_mb']:.0f} MB with {', '.join(eager['heavy']) or 'none'}",
            _ratio(eager["rss_mb"], lean["rss_mb"]) + " less",
        ),
    ]


def report_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    sizes = (
        [
            "--judgments",
            "20000",
            "--calls",
            "40000",
            "--elo-rounds",
            "10",
            "--bt-rounds",
            "10",
            "--ci-rounds",
            "50",
        ]
        if quick
        else []
    )
    code, out = _run([PY, "benchmarks/bench_report.py", *sizes], timeout, env)
    m = re.search(r"Full report: ([\d.]+) s.*?baseline ([\d.]+) s", out)
    if not m:
        return [Row("agreement report", f"failed (rc {code}): {_last_line(out)}")]
    size = "20k judgments, 40k calls" if quick else "1M judgments, 2M calls"
    fast, slow = float(m.group(1)), float(m.group(2))
    return [
        Row(
            f"agreement report, {size}",
            f"{fast:.2f} s",
            f"{slow:.2f} s straightforward",
            _ratio(slow, fast) + " faster",
        )
    ]


def pages_many_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    code, out = _run(
        [PY, "benchmarks/bench_pages_many.py", *(["--quick"] if quick else [])], timeout, env
    )
    m = re.search(
        r"Slowest page beside (\d+) other studies: (\d+) ms.*?fingerprint ([\d.]+) ms, "
        r"alone ([\d.]+) ms",
        out,
    )
    if not m:
        return [Row("pages beside other studies", f"failed (rc {code}): {_last_line(out)}")]
    size = "50k judgments" if quick else "1M judgments"
    others, slowest = m.group(1), m.group(2)
    fast, alone = float(m.group(3)), float(m.group(4))
    return [
        Row(
            f"analysis pages from a snapshot beside {others} other studies of {size}",
            f"slowest {slowest} ms; fingerprint {fast:.1f} ms",
            f"fingerprint {alone:.1f} ms alone",
            _ratio(fast, alone),
        )
    ]


def elo_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    sizes = ["--battles", "5000", "--rounds", "20"] if quick else []
    code, out = _run([PY, "benchmarks/bench_elo.py", *sizes], timeout, env)
    engine = re.search(r"elo_bootstrap, battles resampled:\s+([\d.]+) s", out)
    loops = re.findall(r"^(\S[^:\n]*loop[^:\n]*):\s+([\d.]+) s", out, re.M)
    if not engine:
        return [Row("Elo bootstrap", f"failed (rc {code}): {_last_line(out)}")]
    fast = float(engine.group(1))
    label = "5k battles, 20 rounds" if quick else "50k battles, 100 rounds"
    rows = [Row(f"Elo bootstrap, {label}", f"{fast:.2f} s")]
    for name, seconds in loops:
        rows.append(
            Row(
                f"Elo bootstrap vs {name.strip()}",
                f"{fast:.2f} s",
                f"{float(seconds):.2f} s",
                _ratio(float(seconds), fast) + " faster",
            )
        )
    return rows


def judge_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    url = env["DATABASE_URL"].rsplit("/", 1)[0] + "/" + _db_name(env) + "_judge"
    _create(url)
    sizes = (
        ["--latency", "0.1", "--limit", "10", "--window", "2", "--windows", "2"] if quick else []
    )
    code, out = _run(
        [PY, "benchmarks/bench_judge_throughput.py", *sizes], timeout, env | {"DATABASE_URL": url}
    )
    _drop(url)
    m = re.search(r"(\d+) requests in (\d+) windows, (\d+) allowed; ratio ([\d.]+)", out)
    if not m:
        return [Row("judge throughput", f"failed (rc {code}): {_last_line(out)}")]
    return [
        Row(
            "judge calls through the rate limiter",
            f"{m.group(1)} requests in {m.group(2)} windows",
            f"{m.group(3)} allowed by the limit",
            f"{float(m.group(4)):.2f} of the limit (target >= 0.90)",
        )
    ]


def pl_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    if not (ROOT / "benchmarks" / "bench_pl.py").exists():
        return [Row("PL scoring", "benchmarks/bench_pl.py does not exist yet")]
    url = env["DATABASE_URL"].rsplit("/", 1)[0] + "/" + _db_name(env) + "_pl"
    sizes = (
        ["--answers", "100", "--pairs", "500", "--lists", "100", "--epochs", "5"] if quick else []
    )
    code, out = _run(
        [PY, "benchmarks/bench_pl.py", *sizes], timeout, env | {"BENCH_DATABASE_URL": url}
    )
    _drop(url)
    one = re.search(r"1\. answers/s, PL run / bare encoder: ([\d.]+)", out)
    two = re.search(r"2\. (\d+) pairs / (\d+) answers, time ratio: ([\d.]+)", out)
    bare = re.search(r"bare encoder: \d+ texts in [\d.]+ s \(([\d.]+) answers/s\)", out)
    if not one:
        return [Row("PL scoring", f"failed (rc {code}): {_last_line(out)}")]
    rows = [
        Row(
            "PL run: answers scored per second",
            f"{one.group(1)} of the bare encoder",
            f"bare encoder {bare.group(1) if bare else '?'} answers/s",
            f"{one.group(1)}x",
        )
    ]
    if two:
        rows.append(
            Row(
                f"PL run: {two.group(1)} pairs of {two.group(2)} answers",
                "time of the pairs",
                "time of the answers alone",
                f"{two.group(3)}x (target <= 1.2)",
            )
        )
    return rows


def label_studio_rows(quick: bool, timeout: float, env: dict[str, str]) -> list[Row]:
    """Concord's 8-annotator loop and export beside Label Studio's, in one run
    (benchmarks/bench_label_studio.py, which installs Label Studio the first time)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        path = Path(handle.name)
    sizes = (
        ["--tasks", "10000", "--seconds", "15"]
        if quick
        else ["--tasks", "100000", "--seconds", "30", "--rounds", "2"]
    )
    extra = ["--no-install"] if env.get("BENCH_NO_INSTALL") else []
    script = "benchmarks/bench_label_studio.py"
    code, out = _run([PY, script, "--json", str(path), *sizes, *extra], timeout, env)
    if code == 124:  # stopped past its time: its databases, should its cleanup not have run
        for suffix in ("_ls", "_lsc"):
            _drop(env["DATABASE_URL"] + suffix)
    rows = [
        Row(r["figure"], r["value"], r.get("baseline", ""), r.get("ratio", ""))
        for r in json.loads(path.read_text() or "[]")
    ]
    path.unlink()
    if code != 0 or not rows:
        rows.append(Row("Label Studio 1.23.2", f"failed (rc {code}): {_last_line(out)}"))
    return rows


def _db_name(env: dict[str, str]) -> str:
    return env["DATABASE_URL"].rsplit("/", 1)[1]


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _create(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(url, f'CREATE DATABASE "{name}"')


def _drop(url: str) -> None:
    _admin(url, f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


BENCHMARKS: dict[str, Callable[[bool, float, dict[str, str]], list[Row]]] = {
    "http": http_rows,
    "load": load_rows,
    "claim": claim_rows,
    "export": export_rows,
    "web": web_rows,
    "report": report_rows,
    "pages-many": pages_many_rows,
    "elo": elo_rows,
    "judge": judge_rows,
    "pl": pl_rows,
    "ls": label_studio_rows,
}
ALIASES = {"label-studio": "ls"}
# Label Studio: its first run installs it (5-8 minutes), its migrations take 2-6 minutes on a
# loaded 2-core machine, the import of 100k tasks 4 and its export 11.
# Six studies of 1M judgments and 2M calls take about 25 minutes of COPY on 2 cores.
TIMEOUTS = {"ls": (1200.0, 3600.0), "pages-many": (600.0, 3600.0)}


def print_table(rows: list[Row]) -> None:
    headers = Row("figure", "Concord", "baseline (same run)", "ratio")
    widths = [max(len(getattr(r, f)) for r in [headers, *rows]) for f in Row.__dataclass_fields__]
    line = "+".join("-" * (w + 2) for w in widths)
    for index, row in enumerate([headers, *rows]):
        cells = [getattr(row, f) for f in Row.__dataclass_fields__]
        print("| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |")
        if index == 0:
            print("|" + line.replace("+", "|") + "|")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a shared machine)")
    parser.add_argument(
        "--only", nargs="+", choices=sorted([*BENCHMARKS, *ALIASES]), help="some benchmarks"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per benchmark")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="skip Label Studio when var/label-studio-venv is absent (instead of installing it)",
    )
    args = parser.parse_args()
    only = {ALIASES.get(name, name) for name in args.only or []}
    timeout = args.timeout or (240.0 if args.quick else 1800.0)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord")
    env["PYTHONPATH"] = str(ROOT)
    if args.no_install:
        env["BENCH_NO_INSTALL"] = "1"
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
        host = re.sub(r"^\w+://([^@/]*@)?", "", env.get(name, "")).split(":")[0].split("/")[0]
        if host and host not in ("127.0.0.1", "localhost"):
            print(f"{name} must point at this machine (loopback only), not {host}")
            return 2
    began = time.perf_counter()
    loads = os.getloadavg()
    print(
        f"make bench{' (quick)' if args.quick else ''}: {os.cpu_count()} cores, load average "
        f"{loads[0]:.1f} at the start; each benchmark at most {timeout:.0f} s"
        + (
            ""
            if args.timeout
            else f" (Label Studio's {TIMEOUTS['ls'][0 if args.quick else 1]:.0f} s)"
        )
    )
    rows: list[Row] = []
    for name, bench in BENCHMARKS.items():
        if only and name not in only:
            continue
        limit = args.timeout or TIMEOUTS.get(name, (timeout, timeout))[0 if args.quick else 1]
        try:
            rows += bench(args.quick, limit, env)
        except Exception as exc:  # noqa: BLE001 - one benchmark's failure is one row
            rows.append(Row(name, f"failed: {type(exc).__name__}: {exc}"[:120]))
    loads = os.getloadavg()
    print()
    print_table(rows)
    print(
        f"\n{time.perf_counter() - began:.0f} s in all; load average {loads[0]:.1f} at the end "
        "(figures on a loaded machine are lower than on a quiet one; ratios hold better)"
    )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
