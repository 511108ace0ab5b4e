"""Throughput of judge calls against the configured rate limit (not a test; run on demand).

Starts the fake OpenAI server with injected latency, one real Celery worker (threads pool), and a
judge run with more calls than the measured period can take; then counts the requests that reach
the server in whole rate windows after the first one and prints their ratio to what the limit
allows. Target: at least 0.90.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/concord_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/6 REDIS_URL=redis://127.0.0.1:6379/7 \\
    .venv/bin/python benchmarks/bench_judge_throughput.py [--latency 0.5] [--limit 20]

It migrates the database it is given and removes what it created when done.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per reply")
    parser.add_argument("--limit", type=int, default=20, help="requests per window")
    parser.add_argument("--window", type=float, default=5.0, help="seconds per rate window")
    parser.add_argument("--windows", type=int, default=3, help="windows measured")
    parser.add_argument("--threads", type=int, default=8, help="worker threads")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["CONCORD_JUDGE_RATE_WINDOW_SECONDS"] = str(args.window)
    os.environ["CONCORD_JUDGE_TEST_KEY"] = "sk-test-fake-key"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from annotation.models import Study
    from judges.models import Judge
    from judges.services.runs import judge_run_cancel, judge_run_start
    from tests.judges.conftest import KEY_ENV, make_llm_judge, make_marked_pairs
    from tests.judges.fake_openai import API_KEY, FakeOpenAI
    from tests.judges.integration import broker_purge, worker_start

    os.environ[KEY_ENV] = API_KEY
    call_command("migrate", verbosity=0)
    broker_purge(settings.CELERY_BROKER_URL)
    stamp = str(int(time.time()))
    fake = FakeOpenAI(delay=args.latency).start()
    user = User.objects.create_superuser(f"bench-{stamp}", password=None)
    study = Study.objects.create(slug=f"bench-{stamp}", name="Throughput benchmark")
    needed = args.limit * (args.windows + 2)
    make_marked_pairs(study, needed // 2 + 1)
    judge = make_llm_judge(fake, name=f"bench-{stamp}", rpm=args.limit)
    workdir = ROOT / "var" / "bench"
    workdir.mkdir(parents=True, exist_ok=True)
    worker = worker_start(
        workdir,
        f"bench-{stamp}",
        pool="threads",
        concurrency=args.threads,
        env={"CONCORD_JUDGE_RATE_WINDOW_SECONDS": str(args.window)},
    )
    try:
        run = judge_run_start(judge=judge, study=study, user=user)
        while not fake.times():
            time.sleep(0.05)
        first = fake.times()[0]
        # Measure whole windows after the first, so the opening burst does not flatter the rate.
        start = first + args.window
        end = start + args.window * args.windows
        while time.time() < end + 1:
            time.sleep(0.2)
        count = sum(1 for t in fake.times() if start <= t < end)
        allowed = args.limit * args.windows
        run.refresh_from_db()
        if run.status != "running":
            print(f"the run ended ({run.status}) before the measurement did; add calls")
            return 1
        judge_run_cancel(run=run, user=user)
    finally:
        worker.stop()
        fake.stop()
    ratio = count / allowed
    print(
        f"latency {args.latency:.2f} s, limit {args.limit} per {args.window:g} s, "
        f"{args.threads} threads: {count} requests in {args.windows} windows, "
        f"{allowed} allowed; ratio {ratio:.3f} (target >= 0.90)"
    )
    Study.objects.filter(pk=study.pk).delete()
    Judge.objects.filter(pk=judge.pk).delete()
    user.delete()
    return 0 if ratio >= 0.9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
