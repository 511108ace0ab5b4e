"""Time the full agreement report on 1M human judgments and 2M judge calls in PostgreSQL.

Run from the repository root, with DATABASE_URL pointing at a PostgreSQL server:

    DJANGO_SETTINGS_MODULE=config.settings.test PYTHONPATH=. python benchmarks/bench_report.py

The script works in a database of its own (DATABASE_URL's name + "_bench"), created, migrated and
filled with COPY, and drops it at the end; with --keep (and --reuse) it is "_bench_report_kept",
which no other run drops. It prints the time of each stage of the
report (reading the rows, hashing them, each statistic) and the total, each next to the same
stage run with the straightforward implementation of benchmarks/report_baseline.py in the same
process, and their ratio (--no-baseline skips the baseline). Then it stores the default report
as the analysis worker does and times the analysis page, the downloads and the API served from
that snapshot, beside the recompute they no longer wait for (--no-pages skips it).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse, urlunparse

import numpy as np


def bench_database_url(url: str, *, kept: str = "") -> tuple[str, str]:
    """The benchmark's own database URL and name, next to the one in DATABASE_URL.

    `<name>_bench` for a run that drops its database at the end (as `make bench` does); with
    `kept`, the script's name, `<name>_bench_<kept>_kept` for a run with --keep or --reuse, so
    that no other run's create or drop reaches a database kept for later.
    """
    parts = urlparse(url)
    name = parts.path.lstrip("/") + (f"_bench_{kept}_kept" if kept else "_bench")
    return urlunparse(parts._replace(path="/" + name)), name


def recreate_database(url: str, name: str, *, drop_only: bool = False) -> None:
    import psycopg

    admin = urlunparse(urlparse(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def fill(*, judgments: int, calls: int, judges: int, seed: int, slug: str = "bench") -> int:
    """Create one study with enough pairs, 1 vote per (pair, rater) and calls in both orders
    (its slug `slug`, its judges named after it), and ANALYZE."""
    from django.db import connection

    from annotation.models import Study, System
    from judges.models import Judge, JudgeRun

    rng = np.random.default_rng(seed)
    n_systems, votes_per_pair = 8, 4
    n_pairs = max(judgments // votes_per_pair, calls // (2 * judges))
    pairs_per_prompt = n_systems * (n_systems - 1) // 2
    n_prompts = -(-n_pairs // pairs_per_prompt)
    study = Study.objects.create(slug=slug, name=f"Benchmark study {slug}")
    systems = [System.objects.create(study=study, name=f"system-{i}") for i in range(n_systems)]
    runs = [
        JudgeRun.objects.create(
            judge=Judge.objects.create(name=f"{slug} judge {j}", kind=Judge.Kind.LLM),
            study=study,
            status=JudgeRun.Status.DONE,
        )
        for j in range(judges)
    ]
    categories = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem"]
    strength = rng.normal(0, 1, n_systems)
    with connection.cursor() as cursor:
        raw = cursor.cursor
        with raw.copy(
            "COPY annotation_prompt (study_id, external_id, category, turns, created_at) FROM STDIN"
        ) as copy:
            for p in range(n_prompts):
                copy.write_row((study.pk, f"q{p}", categories[p % 7], '["Q?"]', "2026-01-01"))
        cursor.execute(
            "SELECT id FROM annotation_prompt WHERE study_id = %s ORDER BY id", [study.pk]
        )
        prompt_ids = [row[0] for row in cursor.fetchall()]
        with raw.copy(
            "COPY annotation_answer (prompt_id, system_id, turns, leak_matches, leak_flagged, "
            "leak_remedy, leak_note, created_at) FROM STDIN"
        ) as copy:
            for prompt_id in prompt_ids:
                for system in systems:
                    copy.write_row(
                        (prompt_id, system.pk, '["a"]', "[]", False, "", "", "2026-01-01")
                    )
        cursor.execute(
            "SELECT a.id, a.prompt_id FROM annotation_answer a JOIN annotation_prompt p "
            "ON p.id = a.prompt_id WHERE p.study_id = %s ORDER BY a.id",
            [study.pk],
        )
        answers = np.array(cursor.fetchall(), dtype=np.int64).reshape(n_prompts, n_systems, 2)
        combos = [(i, j) for i in range(n_systems) for j in range(i + 1, n_systems)]
        pair_sys: list[tuple[int, int]] = []
        with raw.copy(
            "COPY annotation_pair (study_id, prompt_id, answer_a_id, answer_b_id, turn, source, "
            "is_gold, gold_side, gold_kind, shuffle_key, created_at) FROM STDIN"
        ) as copy:
            made = 0
            for p in range(n_prompts):
                for i, j in combos:
                    if made == n_pairs:
                        break
                    copy.write_row(
                        (
                            study.pk,
                            int(answers[p, i, 1]),
                            int(answers[p, i, 0]),
                            int(answers[p, j, 0]),
                            1,
                            "all_pairs",
                            False,
                            "",
                            "",
                            float(rng.random()),
                            "2026-01-01",
                        )
                    )
                    pair_sys.append((i, j))
                    made += 1
        cursor.execute("SELECT id FROM annotation_pair WHERE study_id = %s ORDER BY id", [study.pk])
        pair_ids = np.array([row[0] for row in cursor.fetchall()], dtype=np.int64)
        sys_a = np.array([s[0] for s in pair_sys])
        sys_b = np.array([s[1] for s in pair_sys])
        n_workers = 2000
        with raw.copy(
            "COPY annotation_worker (study_id, panel, external_id, state, panel_session_id, "
            "session_key, state_reason, finished_full, excluded, prolific_verification, "
            "prolific_status, created_at) FROM STDIN"
        ) as copy:
            for w in range(n_workers):
                copy.write_row(
                    (
                        study.pk,
                        "imported",
                        f"rater-{w}",
                        "done",
                        "",
                        "",
                        "",
                        False,
                        False,
                        "",
                        "",
                        "2026-01-01",
                    )
                )
        cursor.execute(
            "SELECT id FROM annotation_worker WHERE study_id = %s ORDER BY id", [study.pk]
        )
        worker_ids = np.array([row[0] for row in cursor.fetchall()], dtype=np.int64)

        def likert_for(idx: np.ndarray) -> np.ndarray:
            # Better systems get lower (A-favouring) canonical scores, with noise.
            gap = strength[sys_b[idx]] - strength[sys_a[idx]]
            return np.clip(np.rint(4.5 - 1.5 * gap + rng.normal(0, 1.5, idx.size)), 1, 8)

        def preference(likert: np.ndarray) -> np.ndarray:
            return np.where(likert <= 3, "A", np.where(likert >= 6, "B", "tie"))

        pair_idx = np.repeat(np.arange(n_pairs), votes_per_pair)[:judgments]
        likert = likert_for(pair_idx).astype(int)
        a_left = rng.random(judgments) < 0.5
        shown = np.where(a_left, likert, 9 - likert)
        prefs = preference(likert)
        workers = worker_ids[
            (pair_idx * 7 + np.tile(np.arange(votes_per_pair), n_pairs)[:judgments] * 389)
            % n_workers
        ]
        with raw.copy(
            "COPY annotation_humanjudgment (study_id, pair_id, worker_id, is_imported, a_left, "
            "likert_shown, likert, preference, values, reason, acceptability_a, "
            "acceptability_b, axes, comment, excluded, created_at) FROM STDIN"
        ) as copy:
            for k in range(judgments):
                copy.write_row(
                    (
                        study.pk,
                        int(pair_ids[pair_idx[k]]),
                        int(workers[k]),
                        True,
                        bool(a_left[k]),
                        int(shown[k]),
                        int(likert[k]),
                        str(prefs[k]),
                        "[]",
                        "",
                        "",
                        "",
                        "{}",
                        "",
                        False,
                        "2026-01-01",
                    )
                )
        per_run = calls // (2 * judges)
        with raw.copy(
            'COPY judges_judgecall (run_id, pair_id, turn, "order", status, request, raw_output, '
            "likert_shown, likert, preference, verdict_label, values, parse_error, refusal, "
            "error, tokens_in, tokens_out, cost_usd, model_version_reported, attempts, "
            "lease_token, unrecorded_requests, attempt_errors, created_at) FROM STDIN"
        ) as copy:
            for run in runs:
                idx = np.arange(per_run)
                for order in ("ab", "ba"):
                    likert_c = likert_for(idx).astype(int)
                    # A judge that leans towards the answer shown first.
                    shown_c = np.where(order == "ab", likert_c, 9 - likert_c)
                    shown_c = np.clip(shown_c - (rng.random(per_run) < 0.2), 1, 8)
                    likert_c = shown_c if order == "ab" else 9 - shown_c
                    prefs_c = preference(likert_c)
                    for k in range(per_run):
                        copy.write_row(
                            (
                                run.pk,
                                int(pair_ids[k]),
                                1,
                                order,
                                "done",
                                "{}",
                                "",
                                int(shown_c[k]),
                                int(likert_c[k]),
                                str(prefs_c[k]),
                                "",
                                "[]",
                                "",
                                False,
                                "",
                                0,
                                0,
                                0,
                                "",
                                1,
                                "",
                                0,
                                "[]",
                                "2026-01-01",
                            )
                        )
        cursor.execute("ANALYZE")
    return study.pk


def _steps(data: Any) -> list[tuple[str, Callable[[], Any]]]:
    """Each registered section's compute, timed on its own."""
    from leaderboard.report.registry import SECTIONS

    return [(f"section {s.key}", functools.partial(s.compute, data)) for s in SECTIONS]


def _timed(step: Callable[[], Any]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def _row(label: str, fast: float, slow: float | None) -> None:
    if slow is None:
        print(f"  {label:<40} {fast:8.2f} s", flush=True)
    else:
        print(f"  {label:<40} {fast:8.2f} s {slow:9.2f} s {slow / fast:7.1f}x", flush=True)


def timed_report(
    study_id: int, rounds: dict[str, int], seed: int, *, with_baseline: bool
) -> dict[str, float]:
    """Run the report's stages one by one, timing each, then the whole report; with the
    baseline, time each the straightforward way too, in this same process."""
    from annotation.models import Study
    from benchmarks.report_baseline import baseline
    from leaderboard.report.document import report_libraries_load
    from leaderboard.selectors.frames import VoteFilters, study_votes_get
    from leaderboard.selectors.snapshots import votes_data_hash
    from leaderboard.services import reports

    # Load (or compile) the Elo kernels and import the analysis libraries first, as the
    # analysis worker does as it starts, so that neither run pays for them below.
    start = time.perf_counter()
    report_libraries_load()
    print(
        f"  (numba kernels and analysis libraries loaded, once per process: "
        f"{time.perf_counter() - start:.2f} s)"
    )

    study = Study.objects.get(pk=study_id)
    params = reports.ReportParams(
        seed=seed,
        ci_rounds=rounds["ci_rounds"],
        elo_rounds=rounds["elo_rounds"],
        bt_rounds=rounds["bt_rounds"],
    )
    filters = VoteFilters()
    timings: dict[str, float] = {}
    header = "stage", "fast", "baseline", "ratio"
    print(f"  {header[0]:<40} {header[1]:>10} {header[2]:>11} {header[3]:>8}")
    start = time.perf_counter()
    votes = study_votes_get(study=study, filters=filters)
    timings["read rows (selectors)"] = time.perf_counter() - start
    _row("read rows (selectors)", timings["read rows (selectors)"], None)
    print(
        f"    {len(votes.human):,} human votes, {len(votes.calls):,} judge calls, "
        f"{len(votes.pairs):,} pairs"
    )
    timings["hash rows"] = _timed(lambda: votes_data_hash(votes=votes))
    _row("hash rows", timings["hash rows"], None)
    _, reads = reports.votes_and_reads_get(study=study, filters=filters)
    data = reports.report_data(votes=votes, reads=reads, params=params)
    for label, step in _steps(data):
        timings[label] = _timed(step)
        slow = None
        if with_baseline:
            with baseline():
                slow = _timed(step)
            timings[label + " (baseline)"] = slow
        _row(label, timings[label], slow)

    full = "FULL REPORT (agreement_report_build)"
    fast_report: dict[str, Any] = {}

    def build() -> None:
        fast_report["r"] = reports.agreement_report_build(
            study=study, filters=filters, params=params
        )

    timings[full] = _timed(build)
    slow = None
    if with_baseline:
        slow_report: dict[str, Any] = {}

        def build_slow() -> None:
            slow_report["r"] = reports.agreement_report_build(
                study=study, filters=filters, params=params
            )

        with baseline():
            slow = _timed(build_slow)
        timings[full + " (baseline)"] = slow
        same = _without_ci(fast_report["r"]) == _without_ci(slow_report["r"])
        print(f"    fast and baseline reports equal outside the agreement CIs: {same}")
    _row(full, timings[full], slow)
    return timings


def _without_ci(report: Any) -> Any:
    """The report less its agreement bootstrap intervals, whose protocol changed (same
    distribution, different draws); every other number must be equal."""
    if isinstance(report, dict):
        return {k: _without_ci(v) for k, v in report.items() if k != "ci"}
    if isinstance(report, list):
        return [_without_ci(v) for v in report]
    return report


def timed_pages(study_id: int, *, repeat: int = 5) -> dict[str, float]:
    """Store the default report as the analysis worker does (timed: the recompute), then serve
    the analysis page, the JSON and CSV downloads, a plot and the API from that snapshot through
    Django's test client, `repeat` times each, and print the median time and statements of each.

    The baseline in this run is the recompute itself: what a request cost when the page computed
    the report while the researcher waited."""
    from annotation.models import Study
    from leaderboard.services.reports import agreement_report_snapshot

    study = Study.objects.get(pk=study_id)
    start = time.perf_counter()
    agreement_report_snapshot(study=study, recompute=True)
    recompute = time.perf_counter() - start
    print(f"  recompute with the default parameters (worker, snapshot stored): {recompute:.2f} s")
    return {"recompute (worker)": recompute, **served_pages(study_id, repeat=repeat)}


def served_pages(study_id: int, *, repeat: int = 5) -> dict[str, float]:
    """Serve the analysis page, the JSON and CSV downloads, a plot and the API of the study's
    stored snapshot through Django's test client, `repeat` times each; print and return the
    median time of each, with its statements."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from annotation.models import Study

    study = Study.objects.get(pk=study_id)
    admin = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", "bench@example.invalid", None
    )
    client = Client()
    client.force_login(admin)
    base = f"/studies/{study.slug}/analysis"
    targets = {
        "analysis page": f"{base}/",
        "report.json": f"{base}/report.json",
        "table agreement.csv": f"{base}/tables/agreement.csv",
        "plot category-correlation.svg": f"{base}/plots/category-correlation.svg",
        "API report": f"/api/v1/studies/{study.slug}/report/",
    }
    timings: dict[str, float] = {}
    print(
        f"  {'served from the snapshot':<40} {'median':>10} {'statements':>11} {'status':>7} "
        f"{'slowest statement':>18}"
    )
    for label, path in targets.items():
        times, statuses, statements, slowest = [], set(), 0, []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                start = time.perf_counter()
                response = client.get(path)
                times.append(time.perf_counter() - start)
            statuses.add(response.status_code)
            statements = len(queries)
            slowest.append(max((float(q["time"]) for q in queries.captured_queries), default=0))
        timings[label] = float(np.median(times))
        status = ",".join(str(s) for s in sorted(statuses))
        print(
            f"  {label:<40} {timings[label] * 1000:>8.0f} ms {statements:>11} {status:>7} "
            f"{float(np.median(slowest)) * 1000:>15.1f} ms"
        )
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=2_000_000)
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--elo-rounds", type=int, default=1000)
    parser.add_argument("--bt-rounds", type=int, default=1000)
    parser.add_argument("--ci-rounds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip timing the straightforward baseline"
    )
    parser.add_argument(
        "--pages-only", action="store_true", help="with --reuse: time only the served pages"
    )
    parser.add_argument(
        "--no-pages", action="store_true", help="skip serving the pages from a stored snapshot"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="use a kept benchmark database instead of filling one"
    )
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    # Point the settings at the benchmark's database before Django reads them.
    url, name = bench_database_url(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord"),
        kept="report" if args.keep or args.reuse else "",
    )
    os.environ["DATABASE_URL"] = url
    if not args.reuse:
        recreate_database(url, name)
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    try:
        if args.reuse:
            from annotation.models import Study

            study_id = Study.objects.get(slug="bench").pk
            print(f"Reusing {name}")
        else:
            call_command("migrate", verbosity=0)
            print(
                f"Filling {name}: {args.judgments:,} human judgments, {args.calls:,} judge calls "
                f"({args.judges} judges, both orders)"
            )
            start = time.perf_counter()
            study_id = fill(
                judgments=args.judgments, calls=args.calls, judges=args.judges, seed=args.seed
            )
            print(f"  filled with COPY in {time.perf_counter() - start:.1f} s")
        if not args.pages_only:
            print(
                f"Report stages (ci_rounds={args.ci_rounds}, elo_rounds={args.elo_rounds}, "
                f"bt_rounds={args.bt_rounds}):"
            )
            timings = timed_report(
                study_id,
                {
                    "ci_rounds": args.ci_rounds,
                    "elo_rounds": args.elo_rounds,
                    "bt_rounds": args.bt_rounds,
                },
                args.seed,
                with_baseline=not args.no_baseline,
            )
            total = timings["FULL REPORT (agreement_report_build)"]
            line = f"Full report: {total:.2f} s (target: under 10 s)"
            slow = timings.get("FULL REPORT (agreement_report_build) (baseline)")
            if slow is not None:
                line += f"; baseline {slow:.2f} s in this run, {slow / total:.1f}x faster"
            print(line)
        if not args.no_pages:
            print("Served from a current snapshot (target: each under 150 ms, no row read):")
            pages = timed_pages(study_id)
            recompute = pages.pop("recompute (worker)")
            slowest = max(pages.values())
            print(
                f"Slowest page: {slowest * 1000:.0f} ms; recompute {recompute:.2f} s in this "
                f"run, {recompute / slowest:.0f}x slower"
            )
    finally:
        connections.close_all()
        if not (args.keep or args.reuse):
            recreate_database(url, name, drop_only=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
