"""Claims per second of the assignment engine at 100k and 1M pairs, 8 and 32 concurrent workers.

Next to it, in the same run and on the same data, a minimal raw-SQL claim (one statement:
index-ordered from a random key, FOR UPDATE SKIP LOCKED, INSERT ... RETURNING) as the baseline,
and a few single-threaded ORDER BY random() claims to show what sorting the pool costs.

Run on demand (it builds its own database; 1M pairs take a minute or two to generate):

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/concord_bench \\
        .venv/bin/python benchmarks/bench_claim.py [--sizes 100000 1000000] [--seconds 5] \\
        [--selection active]

With --selection active the study draws by priority (docs/active.md): every pair gets a random
priority and its Efraimidis-Spirakis key, as a recompute would store them, and 20% of the
draws are uniform.

Each claim is followed by marking the assignment submitted, so every worker keeps claiming new
pairs. Numbers depend on the machine; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ["DATABASE_URL"] = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/concord_bench"
)

import django  # noqa: E402
import psycopg  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from annotation.models import Assignment, Study, Worker  # noqa: E402
from annotation.services.assignments import assignment_claim_next  # noqa: E402

RAW_CLAIM = """
WITH candidate AS (
    SELECT p.id FROM annotation_pair p
    WHERE p.study_id = %(study)s AND NOT p.is_gold AND p.shuffle_key >= %(start)s
      AND (SELECT count(*) FROM annotation_assignment a
           WHERE a.pair_id = p.id
             AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > now())))
          < %(overlap)s
      AND NOT EXISTS (SELECT 1 FROM annotation_assignment a
                      WHERE a.pair_id = p.id AND a.worker_id = %(worker)s)
    ORDER BY p.shuffle_key
    LIMIT 1
    FOR UPDATE OF p SKIP LOCKED
)
INSERT INTO annotation_assignment
    (public_id, study_id, pair_id, worker_id, a_left, status, reserved_at, expires_at)
SELECT gen_random_uuid(), %(study)s, candidate.id, %(worker)s, true, 'reserved', now(),
       now() + interval '10 minutes'
FROM candidate
RETURNING id
"""

RANDOM_CLAIM = """
SELECT p.id FROM annotation_pair p
WHERE p.study_id = %(study)s AND NOT p.is_gold
  AND (SELECT count(*) FROM annotation_assignment a
       WHERE a.pair_id = p.id
         AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > now())))
      < %(overlap)s
  AND NOT EXISTS (SELECT 1 FROM annotation_assignment a
                  WHERE a.pair_id = p.id AND a.worker_id = %(worker)s)
ORDER BY random()
LIMIT 1
"""


def ensure_database() -> None:
    name = settings.DATABASES["default"]["NAME"]
    params = settings.DATABASES["default"]
    with psycopg.connect(
        host=params["HOST"] or "127.0.0.1",
        port=params["PORT"] or 5432,
        user=params["USER"],
        dbname="postgres",
        autocommit=True,
    ) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    call_command("migrate", verbosity=0)


def make_study(size: int) -> Study:
    """Build a live study of `size` pairs with generate_series: prompts, answers, pairs."""
    slug = f"bench-{size}"
    for old in Study.objects.filter(slug=slug):
        drop_study(old)
    study = Study.objects.create(
        slug=slug, name=slug, status=Study.Status.LIVE, overlap=3, gold_share=0,
        target_per_worker=10**9, time_limit_seconds=600,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO annotation_system (study_id, name, version, decoding, created_at) "
            "VALUES (%s, 'left-model', '1', '{}', now()), (%s, 'right-model', '1', '{}', now())",
            [study.pk, study.pk],
        )
        cursor.execute(
            "INSERT INTO annotation_prompt (study_id, external_id, category, turns, created_at) "
            "SELECT %s, 'p' || g, '', '[\"q\"]', now() FROM generate_series(1, %s) g",
            [study.pk, size],
        )
        cursor.execute(
            "INSERT INTO annotation_answer (prompt_id, system_id, turns, leak_matches, "
            "leak_flagged, leak_remedy, leak_note, created_at) "
            "SELECT p.id, s.id, '[\"a\"]', '[]', false, '', '', now() "
            "FROM annotation_prompt p CROSS JOIN annotation_system s "
            "WHERE p.study_id = %s AND s.study_id = %s ORDER BY p.id, s.id",
            [study.pk, study.pk],
        )
        cursor.execute(
            "INSERT INTO annotation_pair (study_id, prompt_id, answer_a_id, answer_b_id, turn, "
            "source, is_gold, gold_side, gold_kind, shuffle_key, created_at) "
            "SELECT %s, a.prompt_id, min(a.id), max(a.id), 1, 'all_pairs', false, '', '', "
            "random(), now() FROM annotation_answer a JOIN annotation_prompt p "
            "ON p.id = a.prompt_id WHERE p.study_id = %s GROUP BY a.prompt_id",
            [study.pk, study.pk],
        )
    with connection.cursor() as cursor:
        # As autovacuum would: fresh statistics and visibility map before measuring.
        cursor.execute("VACUUM ANALYZE annotation_pair")
        cursor.execute("VACUUM ANALYZE annotation_assignment")
    return study


def make_active(study: Study) -> None:
    """Give every pair a random priority and key and the study its pool, as a recompute does."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE annotation_pair SET priority = random() WHERE study_id = %s", [study.pk]
        )
        cursor.execute(
            "UPDATE annotation_pair SET priority_key = ln(1 - random()) / "
            "greatest(priority, 1e-6) WHERE study_id = %s",
            [study.pk],
        )
        cursor.execute(
            "UPDATE annotation_study s SET selection = 'active', uniform_share = 0.2, "
            "priority_pool = (SELECT count(*) FROM annotation_pair WHERE study_id = s.id), "
            "priority_total = (SELECT sum(priority) FROM annotation_pair WHERE study_id = s.id) "
            "WHERE id = %s",
            [study.pk],
        )
        cursor.execute("VACUUM ANALYZE annotation_pair")


def drop_study(study: Study) -> None:
    """Delete a benchmark study with plain SQL (the ORM's cascade would load every row)."""
    with connection.cursor() as cursor:
        for table in ("annotation_payentry", "annotation_humanjudgment", "annotation_assignment"):
            cursor.execute(f"DELETE FROM {table} WHERE study_id = %s", [study.pk])
        cursor.execute("DELETE FROM annotation_pair WHERE study_id = %s", [study.pk])
        cursor.execute(
            "DELETE FROM annotation_answer USING annotation_prompt p "
            "WHERE annotation_answer.prompt_id = p.id AND p.study_id = %s",
            [study.pk],
        )
        for table in ("annotation_prompt", "annotation_system", "annotation_worker"):
            cursor.execute(f"DELETE FROM {table} WHERE study_id = %s", [study.pk])
        cursor.execute("DELETE FROM annotation_study WHERE id = %s", [study.pk])


def make_workers(study: Study, count: int, tag: str) -> list[Worker]:
    return [
        Worker.objects.create(
            study=study, panel=Worker.Panel.DEMO, external_id=f"{tag}-{count}-{i}"
        )
        for i in range(count)
    ]


def engine_claim(worker: Worker) -> bool:
    assignment = assignment_claim_next(worker=worker)
    if assignment is None:
        return False
    Assignment.objects.filter(pk=assignment.pk).update(
        status=Assignment.Status.SUBMITTED, submitted_at=timezone.now()
    )
    return True


def raw_claim(study: Study) -> Callable[[Worker], bool]:
    import random

    def claim(worker: Worker) -> bool:
        with connection.cursor() as cursor:
            params = {
                "study": study.pk,
                "worker": worker.pk,
                "overlap": study.overlap,
                "start": random.random(),
            }
            cursor.execute(RAW_CLAIM, params)
            row = cursor.fetchone()
            if row is None:
                return True  # the random start was past the last open key: a cheap retry
            cursor.execute(
                "UPDATE annotation_assignment SET status = 'submitted', submitted_at = now() "
                "WHERE id = %s",
                [row[0]],
            )
        return True

    return claim


def run(workers: list[Worker], claim: Callable[[Worker], bool], seconds: float) -> float:
    """Run `claim` in one thread per worker (own connection each); return claims per second."""
    counts = [0] * len(workers)
    start = threading.Barrier(len(workers) + 1)
    stop_at = [0.0]

    def loop(index: int) -> None:
        try:
            start.wait()
            while time.perf_counter() < stop_at[0]:
                if claim(workers[index]):
                    counts[index] += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - began)


def random_order_ms(study: Study, worker: Worker, tries: int = 1) -> float:
    with connection.cursor() as cursor:
        began = time.perf_counter()
        for _ in range(tries):
            cursor.execute(
                RANDOM_CLAIM, {"study": study.pk, "worker": worker.pk, "overlap": study.overlap}
            )
            cursor.fetchone()
    return (time.perf_counter() - began) / tries * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--selection", choices=["uniform", "active"], default="uniform")
    args = parser.parse_args()

    ensure_database()
    print(f"{'pairs':>9} {'workers':>7} {'engine/s':>9} {'raw SQL/s':>10} {'ratio':>6}")
    for size in args.sizes:
        began = time.perf_counter()
        study = make_study(size)
        if args.selection == "active":
            make_active(study)
        built = time.perf_counter() - began
        run(make_workers(study, 4, "warmup"), engine_claim, 1.0)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE annotation_assignment")
        for count in args.workers:
            engine = run(make_workers(study, count, "engine"), engine_claim, args.seconds)
            raw = run(make_workers(study, count, "raw"), raw_claim(study), args.seconds)
            print(f"{size:>9} {count:>7} {engine:>9.1f} {raw:>10.1f} {engine / raw:>6.2f}")
        (probe,) = make_workers(study, 1, "probe")
        print(
            f"{'':>9} built in {built:.1f} s; one ORDER BY random() claim takes "
            f"{random_order_ms(study, probe):.0f} ms (single thread)"
        )
        drop_study(study)


if __name__ == "__main__":
    main()
