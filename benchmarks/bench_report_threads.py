"""Does each of the report's thread pools pay? Time the report with every pool, then with one pool
at a time run one task after another, in the same process, on the same rows.

    DJANGO_SETTINGS_MODULE=config.settings.test PYTHONPATH=. \\
        python benchmarks/bench_report_threads.py [--judgments N] [--calls N] [--repeat K]

The report runs its independent parts in threads (leaderboard/parallel.py) at three places:

- ``frames``: the vote frames' reads of pairs, people's votes and calls, each on its own
  connection (leaderboard/selectors/frames.py);
- ``reads``: the votes beside the sections' declared reads, heavy reads on connections of their
  own (leaderboard/selectors/section_reads.py, reads_get);
- ``sections``: the sections whose compute releases Python's lock (the Elo kernel) beside the
  others (leaderboard/report/document.py).

For each, the whole report (the analysis worker's read and compute, without the store) is timed
``--repeat`` times with all pools and with that pool serial, alternating so that the machine's
drift falls on both, and the medians and their ratio printed (serial / threaded: above 1, the
pool pays). The study is filled as bench_report.py fills it, in a database of its own
(DATABASE_URL's name + "_bench"), dropped at the end. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_report import bench_database_url, fill, recreate_database  # noqa: E402

# Each pool: the module whose `run_parallel` runs it.
POOLS = {
    "frames": "leaderboard.selectors.frames",
    "reads": "leaderboard.selectors.section_reads",
    "sections": "leaderboard.report.document",
}


def _serial(*tasks: Callable[[], Any], uses_database: bool) -> list[Any]:
    return [task() for task in tasks]


@contextmanager
def serial(pool: str | None) -> Iterator[None]:
    """Run the named pool's tasks one after another here (None: leave every pool as it is)."""
    if pool is None:
        yield
        return
    import importlib

    module = importlib.import_module(POOLS[pool])
    threaded = getattr(module, "run_parallel")  # noqa: B009 - a module chosen by name
    setattr(module, "run_parallel", _serial)  # noqa: B010
    try:
        yield
    finally:
        setattr(module, "run_parallel", threaded)  # noqa: B010


def report_once(study_id: int, params: Any) -> float:
    """Seconds to read a study's rows and compute its report, as the analysis worker does."""
    from annotation.models import Study
    from leaderboard.selectors.frames import VoteFilters
    from leaderboard.services import reports

    study = Study.objects.get(pk=study_id)
    filters = VoteFilters()
    start = time.perf_counter()
    votes, reads = reports.votes_and_reads_get(study=study, filters=filters)
    reports.report_compute(study=study, votes=votes, filters=filters, params=params, reads=reads)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judgments", type=int, default=200_000)
    parser.add_argument("--calls", type=int, default=400_000)
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=200, help="every bootstrap's rounds")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    url, name = bench_database_url(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord")
    )
    os.environ["DATABASE_URL"] = url
    recreate_database(url, name)
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    try:
        call_command("migrate", verbosity=0)
        print(f"Filling {name}: {args.judgments:,} judgments, {args.calls:,} calls")
        study_id = fill(
            judgments=args.judgments, calls=args.calls, judges=args.judges, seed=args.seed
        )
        from leaderboard.report.base import ReportParams
        from leaderboard.report.document import report_libraries_load

        report_libraries_load()
        params = ReportParams(
            seed=args.seed, ci_rounds=args.rounds, elo_rounds=args.rounds, bt_rounds=args.rounds
        )
        report_once(study_id, params)  # warm the caches and the imports once
        print(f"{'pool':<10} {'threaded s':>11} {'serial s':>9} {'ratio':>6}  pays?")
        for pool in POOLS:
            threaded: list[float] = []
            alone: list[float] = []
            for _ in range(args.repeat):
                threaded.append(report_once(study_id, params))
                with serial(pool):
                    alone.append(report_once(study_id, params))
            fast, slow = statistics.median(threaded), statistics.median(alone)
            ratio = slow / fast
            verdict = "yes" if ratio > 1.05 else "no" if ratio < 0.95 else "within noise"
            print(f"{pool:<10} {fast:>11.2f} {slow:>9.2f} {ratio:>6.2f}  {verdict}")
    finally:
        connections.close_all()
        recreate_database(url, name, drop_only=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
