"""Judge calls per second through the whole pipeline, against a plain thread pool (not a test).

An LLM judge run of N calls against an instant local OpenAI-compatible server (the tests' fake,
no delay, no rate limit), worked by real Celery workers (threads pool) on this machine's cores:
each call is claimed (conditional UPDATE), its prompt rendered, the request sent through the
judges' HTTP client, the reply journalled in Redis and recorded with its cost on the ledger in
one transaction. Beside it, in the same run, a plain thread pool makes the same N requests with
the OpenAI SDK and parses each reply, keeping nothing (the FastChat scripts' way): the baseline.

Printed: calls per second of each and their ratio; CPU per call of the workers, of their
PostgreSQL backends and of this process (which serves the fake API); and the checks that make the
figure honest: every call done exactly once (no call lost, no request sent twice) and the ledger
exact (the run's spent_usd equals the sum of its calls' costs, which equals the price of the
tokens the server reported).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/concord_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/6 REDIS_URL=redis://127.0.0.1:6379/7 \\
    .venv/bin/python benchmarks/bench_judge_pipeline.py [--calls 2000] [--workers 2] [--threads 8]

It migrates the database it is given and removes what it created when done. Target (issue 28):
at least 200 calls per second with 2 workers on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and their children, as now."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            process = psutil.Process(pid)
            for one in [process, *process.children(recursive=True)]:
                times = one.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def _backend_pids(database: str) -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        # Statistics views keep the snapshot a transaction first read; ask for a fresh one.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
        return [row[0] for row in cursor.fetchall()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="judge calls in the run")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument("--baseline-threads", type=int, default=16, help="plain pool threads")
    parser.add_argument(
        "--batch", type=int, default=None, help="calls per message (CONCORD_JUDGE_CALL_BATCH)"
    )
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["CONCORD_JUDGE_TEST_KEY"] = "sk-test-fake-key"
    import django

    django.setup()
    import openai
    import psutil
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Count, Sum

    from annotation.models import Study
    from judges.llm.parsing import reply_parse
    from judges.models import Judge, JudgeCall, JudgeRun
    from judges.services.runs import judge_run_start
    from tests.judges.conftest import KEY_ENV, make_llm_judge, make_marked_pairs
    from tests.judges.fake_openai import API_KEY, FakeOpenAI
    from tests.judges.integration import broker_purge, worker_start

    os.environ[KEY_ENV] = API_KEY
    call_command("migrate", verbosity=0)
    broker_purge(settings.CELERY_BROKER_URL)
    stamp = str(int(time.time()))
    fake = FakeOpenAI(delay=0.0).start()
    user = User.objects.create_superuser(f"bench-{stamp}", password=None)
    study = Study.objects.create(slug=f"bench-{stamp}", name="Judge pipeline benchmark")
    pairs = args.calls // 2
    make_marked_pairs(study, pairs)
    judge = make_llm_judge(fake, name=f"bench-{stamp}", order_policy=Judge.OrderPolicy.BOTH)
    calls = pairs * 2
    workdir = ROOT / "var" / "bench"
    workdir.mkdir(parents=True, exist_ok=True)
    batch = args.batch or getattr(settings, "CONCORD_JUDGE_CALL_BATCH", 1)
    workers = [
        worker_start(
            workdir,
            f"pipeline-{stamp}-{n}",
            pool="threads",
            concurrency=args.threads,
            env={"CONCORD_JUDGE_CALL_BATCH": str(batch)},
        )
        for n in range(args.workers)
    ]
    database = str(connection.settings_dict["NAME"])
    me = psutil.Process()
    try:
        worker_cpu0 = _cpu([w.process.pid for w in workers])
        my_cpu0 = me.cpu_times().user + me.cpu_times().system
        # Backends come and go with the workers' connections: each one's CPU is counted from
        # when it was first seen (from zero for one that started during the run) to the last.
        backends0 = {pid: _cpu([pid]) for pid in _backend_pids(database)}
        backends_last = dict(backends0)
        started = time.time()
        run = judge_run_start(judge=judge, study=study, user=user)
        done = 0
        deadline = started + max(120.0, calls / 20)
        polls = 0
        while time.time() < deadline:
            done = JudgeCall.objects.filter(run=run, status=JudgeCall.Status.DONE).count()
            if done >= calls:
                break
            polls += 1
            if polls % 5 == 0:
                backends_last |= {pid: _cpu([pid]) for pid in _backend_pids(database)}
            time.sleep(0.1)
        ended = time.time()
        worker_cpu = _cpu([w.process.pid for w in workers]) - worker_cpu0
        my_cpu = me.cpu_times().user + me.cpu_times().system - my_cpu0
        backends_last |= {pid: _cpu([pid]) for pid in _backend_pids(database)}
        backends = list(backends_last)
        backend_cpu = sum(backends_last[pid] - backends0.get(pid, 0.0) for pid in backends)
    finally:
        for worker in workers:
            worker.stop()
    pipeline_rate = done / (ended - started)

    # The checks: every call done once, one request per call, the ledger exact.
    run.refresh_from_db()
    requests = fake.requests()
    statuses = dict(JudgeCall.objects.filter(run=run).values_list("status").annotate(n=Count("id")))
    spent = JudgeCall.objects.filter(run=run).aggregate(s=Sum("cost_usd"))["s"] or Decimal(0)
    sent_twice = sum(1 for n in requests.values() if n > 1)
    retried = list(
        JudgeCall.objects.filter(run=run, attempts__gt=1).values_list("pk", "attempt_errors")
    )
    run_spent = JudgeRun.objects.get(pk=run.pk).spent_usd

    # The baseline: the same prompts, as the calls stored them, sent by a plain pool.
    prompts = list(
        JudgeCall.objects.filter(run=run, status=JudgeCall.Status.DONE).values_list(
            "request__messages", flat=True
        )
    )
    client = openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0)

    def plain(messages: Any) -> bool:
        reply = client.chat.completions.create(model="gpt-4-fake", messages=messages)
        return reply_parse(reply.choices[0].message.content or "", judge.output_format).ok

    baseline_cpu0 = me.cpu_times().user + me.cpu_times().system
    baseline_start = time.time()
    with ThreadPoolExecutor(max_workers=args.baseline_threads) as pool:
        parsed = sum(pool.map(plain, prompts))
    baseline_time = time.time() - baseline_start
    baseline_cpu = me.cpu_times().user + me.cpu_times().system - baseline_cpu0
    baseline_rate = len(prompts) / baseline_time
    fake.stop()

    print(
        f"pipeline: {done}/{calls} calls done in {ended - started:.1f} s: "
        f"{pipeline_rate:.0f} calls/s ({args.workers} workers x {args.threads} threads, "
        f"{batch} calls a message; target >= 200)"
    )
    print(
        f"  CPU per call: workers {worker_cpu / max(done, 1) * 1000:.2f} ms, their "
        f"{len(backends)} PostgreSQL backends {backend_cpu / max(done, 1) * 1000:.2f} ms, "
        f"this process (fake API, polling) "
        f"{my_cpu / max(done, 1) * 1000:.2f} ms"
    )
    print(
        f"  checks: statuses {statuses}; requests {sum(requests.values())} for {len(requests)} "
        f"calls, {sent_twice} sent more than once; ledger: run spent {run_spent} USD, calls' "
        f"costs {spent} USD ({'exact' if run_spent == spent else 'DIFFERENT'})"
    )
    print(
        f"baseline (plain pool, {args.baseline_threads} threads, OpenAI SDK, nothing kept): "
        f"{len(prompts)} requests in {baseline_time:.1f} s: {baseline_rate:.0f} calls/s, "
        f"{parsed} parsed; CPU per call in this process (pool and fake API) "
        f"{baseline_cpu / max(len(prompts), 1) * 1000:.2f} ms"
    )
    print(f"ratio pipeline / baseline: {pipeline_rate / baseline_rate:.2f}")
    for call_id, errors in retried[:5]:
        print(f"  call {call_id} tried again: {errors}")
    ok = done == calls and sent_twice == 0 and run_spent == spent
    Study.objects.filter(pk=study.pk).delete()
    Judge.objects.filter(pk=judge.pk).delete()
    user.delete()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
