"""Time and memory of the raw-row exports (CSV, JSONL, Parquet) on a big study in PostgreSQL.

Run from the repository root, with DATABASE_URL pointing at a PostgreSQL server:

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python benchmarks/bench_export.py \\
        [--judgments 300000] [--calls 300000] [--json results.json]

It works in a database of its own (DATABASE_URL's name + "_bench"), filled with COPY by
benchmarks/bench_report.py's `fill`, and drops it at the end; with --keep (and --reuse) it is
"_bench_export_kept", which `make bench` and other runs never drop. Each export is written to a
temporary file in a forked process of its own, so that its peak memory (the rise of VmHWM over
the process's resident size when it started) is its own. Next to each, the export as it was
before it streamed (benchmarks/export_baseline.py), in the same run on the same rows. With
--repeat N each is run N times, alternating with its baseline, and the fastest run counts (the
largest peak): on a shared machine the load changes from one run to the next, so the load
average is printed before and after.

With --command, the judgments are also exported by ``manage.py export_study`` in a process of
its own in each format, and that process's peak resident size (everything it imported
included) is printed beside a process that only starts Django and imports the exports.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _measure(job: Callable[[], int], queue: Any) -> None:
    from django.db import connections

    connections.close_all()
    # Reset the peak to the current resident size, so that VmHWM is this export's own.
    Path("/proc/self/clear_refs").write_text("5")
    start_kb = _status_kb("VmRSS")
    began = time.perf_counter()
    try:
        size = job()
    except Exception as exc:  # noqa: BLE001 - handed to the parent, which raises it
        queue.put(f"{type(exc).__name__}: {exc}")
        return
    seconds = time.perf_counter() - began
    queue.put((seconds, (_status_kb("VmHWM") - start_kb) / 1024, size))


def measured(job: Callable[[], int]) -> tuple[float, float, int]:
    """Seconds, peak memory growth in MB and bytes written of `job`, run in a forked child."""
    from django.db import connections

    connections.close_all()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_measure, args=(job, queue))
    child.start()
    result = queue.get(timeout=600)
    child.join()
    if isinstance(result, str):
        raise RuntimeError(result)
    return result


def best_of(runs: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    """The fastest time, the largest peak and the size of a few runs of one export."""
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[0][2]


def process_peak(args: list[str]) -> tuple[float, float]:
    """Seconds and peak resident MB (ru_maxrss) of one command run as a child process."""
    began = time.perf_counter()
    child = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"{args[2:4]} failed: {errors.decode()[-300:]}")
    return time.perf_counter() - began, usage.ru_maxrss / 1024


def load_text() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:  # noqa: C901 - a script: argument checks, then each export measured
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=300_000)
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--reuse", action="store_true", help="use a kept benchmark database")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each export (best counts)")
    parser.add_argument(
        "--command", action="store_true", help="also measure manage.py export_study's memory"
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    from benchmarks.bench_report import bench_database_url, fill, recreate_database

    url, name = bench_database_url(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord"),
        kept="export" if args.keep or args.reuse else "",
    )
    os.environ["DATABASE_URL"] = url
    if not args.reuse:
        recreate_database(url, name)
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    from annotation.models import Study
    from benchmarks.export_baseline import baseline_export
    from leaderboard.services.exports import EXPORT_FORMATS, study_export_write

    results: list[dict[str, Any]] = []
    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            began = time.perf_counter()
            fill(judgments=args.judgments, calls=args.calls, judges=1, seed=args.seed)
            print(
                f"Filled {name} with {args.judgments:,} judgments and {args.calls:,} calls "
                f"in {time.perf_counter() - began:.1f} s"
            )
        study = Study.objects.get(slug="bench")
        folder = Path(tempfile.mkdtemp(prefix="concord-export-bench-"))
        print(f"{load_text()}; best of {args.repeat}")
        print(f"{'table':<10} {'format':<8} {'rows':>8} {'s':>6} {'MB':>6}   baseline s    MB")
        tables = [("judgments", args.judgments), ("calls", args.calls)]
        for table, rows in tables:
            if not rows:
                continue
            for fmt in EXPORT_FORMATS:
                path = folder / f"{table}.{fmt}"

                def ours(table: str = table, fmt: str = fmt, path: Path = path) -> int:
                    with path.open("wb") as out:
                        study_export_write(study=study, table=table, fmt=fmt, out=out)
                    return path.stat().st_size

                def before(table: str = table, fmt: str = fmt, path: Path = path) -> int:
                    path.write_bytes(baseline_export(study=study, table=table, fmt=fmt))
                    return path.stat().st_size

                runs, baseline_runs = [], []
                baseline_error = ""
                for _ in range(args.repeat):
                    runs.append(measured(ours))
                    if args.no_baseline or baseline_error:
                        continue
                    try:
                        baseline_runs.append(measured(before))
                    except Exception as exc:  # noqa: BLE001 - the baseline's own failure is a result
                        baseline_error = f"{type(exc).__name__}: {exc}"
                seconds, mb, size = best_of(runs)
                row: dict[str, Any] = {
                    "table": table,
                    "format": fmt,
                    "rows": rows,
                    "seconds": seconds,
                    "peak_mb": mb,
                    "bytes": size,
                    "runs": len(runs),
                }
                line = f"{table:<10} {fmt:<8} {rows:>8} {seconds:>6.2f} {mb:>6.0f}"
                if baseline_error:
                    row["baseline_error"] = baseline_error
                    line += f"   baseline failed: {baseline_error[:60]}"
                elif baseline_runs:
                    b_seconds, b_mb, _ = best_of(baseline_runs)
                    row |= {"baseline_seconds": b_seconds, "baseline_peak_mb": b_mb}
                    line += f"   {b_seconds:>10.2f} {b_mb:>5.0f}"
                print(line, flush=True)
                results.append(row)
                path.unlink(missing_ok=True)
        if args.command and args.judgments:
            manage = [sys.executable, str(ROOT / "manage.py")]
            idle = [*manage, "shell", "-c", "import leaderboard.services.exports"]
            idle_mb = max(process_peak(idle)[1] for _ in range(args.repeat))
            print(f"export_study, peak resident MB of the process (Django alone: {idle_mb:.0f})")
            for fmt in EXPORT_FORMATS:
                path = folder / f"judgments.{fmt}"
                command = [*manage, "export_study", "--study=bench", "--table=judgments"]
                command += [f"--format={fmt}", f"--output={path}"]
                peaks = [process_peak(command) for _ in range(args.repeat)]
                path.unlink(missing_ok=True)
                seconds, mb = min(p[0] for p in peaks), max(p[1] for p in peaks)
                print(f"{'judgments':<10} {fmt:<8} {args.judgments:>8} {seconds:>6.2f} {mb:>6.0f}")
                results.append(
                    {
                        "table": "judgments",
                        "format": fmt,
                        "via": "export_study",
                        "rows": args.judgments,
                        "seconds": seconds,
                        "process_mb": mb,
                        "idle_process_mb": idle_mb,
                    }
                )
        folder.rmdir()
        print(load_text(), flush=True)
    finally:
        connections.close_all()
        if not (args.keep or args.reuse):
            recreate_database(url, name, drop_only=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
