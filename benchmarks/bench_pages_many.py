"""Time the analysis pages served from a snapshot in a database of many large studies, beside the
same pages in a database holding the measured study alone, in one run.

Run from the repository root, with DATABASE_URL pointing at a PostgreSQL server:

    DJANGO_SETTINGS_MODULE=config.settings.test PYTHONPATH=. python benchmarks/bench_pages_many.py
    ... bench_pages_many.py --quick      # 50k judgments and 100k calls per study (a 2-core box)

The script works in a database of its own (DATABASE_URL's name + "_bench"), created, migrated and
dropped at the end (with --keep, "_bench_pages_many_kept", kept). It fills the measured study
first, so that every other study's rows have larger ids (the case in which a backward walk of a
primary key reads them all), stores its default report as the analysis worker does, and serves
the analysis page, the downloads and the API from that snapshot, with the data fingerprint
alone: the single-study baseline. Then it fills --others studies of the same size after it
(five by default; 1M judgments and 2M calls each in full mode, as issue 27 asks: about 25
minutes of COPY on 2 cores), and serves the same snapshot again, which must still be current.
It prints each page's median and the fingerprint's beside the baseline and their ratio; the
target is the same cost (a ratio near 1), each page under 150 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bench_report import (  # noqa: E402
    bench_database_url,
    fill,
    recreate_database,
    served_pages,
)


def fingerprint_time(study_id: int, *, repeat: int = 25) -> float:
    """The median time of the study's data fingerprint (one statement), read `repeat` times."""
    from annotation.models import Study
    from leaderboard.selectors.snapshots import study_data_fingerprint

    study = Study.objects.get(pk=study_id)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        study_data_fingerprint(study=study)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def snapshot_current(study_id: int) -> bool:
    """Whether the study's default report snapshot is current (served without a recompute)."""
    from annotation.models import Study
    from leaderboard.selectors.frames import VoteFilters
    from leaderboard.services.reports import report_state_get

    study = Study.objects.get(pk=study_id)
    return report_state_get(study=study, filters=VoteFilters()).status == "current"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judgments", type=int, default=1_000_000, help="per study")
    parser.add_argument("--calls", type=int, default=2_000_000, help="per study")
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--others", type=int, default=5, help="studies beside the measured one")
    parser.add_argument("--quick", action="store_true", help="50k judgments, 100k calls each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()
    if args.quick:
        args.judgments, args.calls = 50_000, 100_000

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    url, name = bench_database_url(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord"),
        kept="pages_many" if args.keep else "",
    )
    os.environ["DATABASE_URL"] = url
    recreate_database(url, name)
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    from annotation.models import Study
    from leaderboard.services.reports import agreement_report_snapshot

    try:
        call_command("migrate", verbosity=0)
        size = f"{args.judgments:,} judgments and {args.calls:,} calls"
        print(f"Filling {name}: the measured study, {size}")
        start = time.perf_counter()
        measured = fill(
            judgments=args.judgments,
            calls=args.calls,
            judges=args.judges,
            seed=args.seed,
            slug="measured",
        )
        print(f"  filled with COPY in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        agreement_report_snapshot(study=Study.objects.get(pk=measured), recompute=True)
        print(
            f"  default report stored (the worker's recompute): {time.perf_counter() - start:.1f} s"
        )
        print("Baseline: the measured study alone in the database")
        alone = served_pages(measured)
        alone["fingerprint"] = fingerprint_time(measured)
        print(f"  {'data fingerprint (one statement)':<40} {alone['fingerprint'] * 1000:>8.1f} ms")

        print(f"Filling {args.others} other studies after it, {size} each")
        start = time.perf_counter()
        for index in range(args.others):
            fill(
                judgments=args.judgments,
                calls=args.calls,
                judges=args.judges,
                seed=args.seed + 1 + index,
                slug=f"other-{index}",
            )
        print(f"  filled with COPY in {time.perf_counter() - start:.1f} s")
        if not snapshot_current(measured):
            print("The measured study's snapshot is no longer current: the fingerprint moved")
            return 1
        print(f"With {args.others} other studies in the database (the snapshot still current)")
        many = served_pages(measured)
        many["fingerprint"] = fingerprint_time(measured)
        print(f"  {'data fingerprint (one statement)':<40} {many['fingerprint'] * 1000:>8.1f} ms")

        print(f"\n  {'':<40} {'alone':>10} {'beside':>10} {'ratio':>7}")
        for label in alone:
            print(
                f"  {label:<40} {alone[label] * 1000:>7.1f} ms {many[label] * 1000:>7.1f} ms "
                f"{many[label] / alone[label]:>6.2f}x"
            )
        slowest = max(v for k, v in many.items() if k != "fingerprint")
        print(
            f"Slowest page beside {args.others} other studies: {slowest * 1000:.0f} ms "
            f"(target 150 ms); fingerprint {many['fingerprint'] * 1000:.1f} ms, "
            f"alone {alone['fingerprint'] * 1000:.1f} ms in this run"
        )
    finally:
        connections.close_all()
        if not args.keep:
            recreate_database(url, name, drop_only=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
