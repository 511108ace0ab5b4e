"""A database kept for later (--keep, then --reuse) has a name no other benchmark run creates or
drops: `make bench` runs bench_report and bench_export, each dropping its `_bench` database."""

from __future__ import annotations

from benchmarks.bench_report import bench_database_url

URL = "postgres://postgres@127.0.0.1:5433/concord"


def test_a_kept_benchmark_database_is_not_the_one_a_plain_run_drops() -> None:
    plain = bench_database_url(URL)
    export_kept = bench_database_url(URL, kept="export")
    report_kept = bench_database_url(URL, kept="report")
    assert plain == (URL + "_bench", "concord_bench")
    assert export_kept == (URL + "_bench_export_kept", "concord_bench_export_kept")
    assert len({plain[1], export_kept[1], report_kept[1]}) == 3
