"""Judge runs end to end: real Celery workers, Redis, PostgreSQL and the fake API over HTTP.

Each test starts its own worker processes on this test's database and stops them at the end.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal

import pytest
from django.conf import settings
from django.urls import reverse

from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.judges import judge_create
from judges.services.runs import judge_calls_reconcile, judge_run_start
from tests.conftest import PASSWORD
from tests.judges.conftest import make_llm_judge, make_marked_pairs, pair_key
from tests.judges.fake_openai import Fault
from tests.judges.integration import (
    FAST_ENV,
    ROOT,
    PrivateRedis,
    broker_purge,
    free_port,
    process_env,
    wait_for,
    worker_start,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _fast_settings(settings):
    settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS = int(
        FAST_ENV["CONCORD_JUDGE_PENDING_GRACE_SECONDS"]
    )
    settings.CONCORD_JUDGE_LEASE_SECONDS = int(FAST_ENV["CONCORD_JUDGE_LEASE_SECONDS"])
    broker_purge(settings.CELERY_BROKER_URL)


@pytest.fixture
def workers(tmp_path):
    started = []

    def start(name, **kwargs):
        worker = worker_start(tmp_path, name, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def run_status(run):
    return JudgeRun.objects.values_list("status", flat=True).get(pk=run.pk)


def explain(run, *workers):
    counts = Counter(JudgeCall.objects.filter(run=run).values_list("status", flat=True))
    logs = "\n".join(worker.text()[-2500:] for worker in workers)
    return f"run {run_status(run)}, calls {dict(counts)}\n{logs}"


def assert_each_call_generated_once(run, fake, pairs):
    keys = {pair_key(pair, order) for pair in pairs for order in ("ab", "ba")}
    assert fake.generations() == Counter(dict.fromkeys(keys, 1))
    assert set(JudgeCall.objects.filter(run=run).values_list("status", flat=True)) == {"done"}


def test_every_pair_is_judged_in_both_orders_exactly_once(cast, fake, api_key, workers):
    pairs = make_marked_pairs(cast.study, 6)
    fake.delay = 0.02
    fake.inject(Fault("429", key=pair_key(pairs[0], "ab"), retry_after=0.5))
    fake.inject(Fault("500", key=pair_key(pairs[1], "ba")))
    fake.inject(Fault("garbage", key=pair_key(pairs[2], "ab")))
    fake.replies[pair_key(pairs[3], "ba")] = "likert_out_of_range"
    worker = workers("w1")
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    wait_for(lambda: run_status(run) == "done", 60, lambda: explain(run, worker))

    assert_each_call_generated_once(run, fake, pairs)
    assert sum(fake.requests().values()) == 12 + 3
    retried = JudgeCall.objects.get(run=run, pair=pairs[0], order="ab")
    assert retried.attempts == 2 and retried.likert == 2
    bad = JudgeCall.objects.get(run=run, pair=pairs[3], order="ba")
    assert "outside 1-8" in bad.parse_error and bad.raw_output.startswith("9")


def test_a_worker_killed_mid_run_loses_no_call_and_makes_none_twice(cast, fake, api_key, workers):
    pairs = make_marked_pairs(cast.study, 8)
    fake.delay = 0.3
    first = workers("doomed")
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    wait_for(lambda: sum(fake.requests().values()) >= 4, 30, lambda: explain(run, first))
    # Kill it while a request is very likely in flight (each takes 0.3 s).
    time.sleep(0.1)
    first.kill()
    killed_at = sum(fake.requests().values())
    assert 0 < killed_at < 16
    second = workers("survivor")
    wait_for(
        lambda: run_status(run) == "done",
        60,
        lambda: explain(run, first, second),
        every=0.5,
        tick=judge_calls_reconcile,
    )

    assert_each_call_generated_once(run, fake, pairs)
    requests = fake.requests()
    # A request in flight when the worker died is sent again (no API can promise otherwise);
    # it carries the same idempotency key, so it is answered from the cache, not paid again.
    # The worker's one thread had at most one batch of requests in flight.
    resent = [key for key, count in requests.items() if count > 1]
    assert len(resent) <= settings.CONCORD_JUDGE_CALL_BATCH
    assert all(requests[key] == 2 for key in resent)


def test_a_redis_restart_mid_run_delays_work_but_loses_none(cast, fake, api_key, tmp_path, workers):
    broker = PrivateRedis(tmp_path)
    broker.start()
    try:
        pairs = make_marked_pairs(cast.study, 8)
        judge = make_llm_judge(fake)
        fake.delay = 0.25
        worker = workers("beat-worker", broker_url=broker.url, beat=True)
        # Started from the command line, which queues on the private broker.
        cli = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "judge_run",
                "--study",
                cast.study.slug,
                "--judge",
                judge.name,
                "--user",
                cast.researcher.username,
            ],
            cwd=ROOT,
            env=process_env(broker_url=broker.url),
            capture_output=True,
            text=True,
            check=False,
        )
        assert cli.returncode == 0, cli.stderr
        run = JudgeRun.objects.get(judge=judge)
        wait_for(lambda: sum(fake.requests().values()) >= 4, 30, lambda: explain(run, worker))
        broker.shutdown()
        time.sleep(1)
        broker.start()
        # Nothing is queued any more; the reconciler, run by beat, queues the rest again.
        wait_for(lambda: run_status(run) == "done", 60, lambda: explain(run, worker), every=0.5)
        assert_each_call_generated_once(run, fake, pairs)
        assert "judges.calls_reconcile" in worker.text()
    finally:
        broker.shutdown()


def test_the_budget_cap_stops_the_run(cast, fake, api_key, workers):
    pairs = make_marked_pairs(cast.study, 6)
    # Each reply has 31 output tokens at 1000 USD per million: 0.031 USD a call.
    judge = make_llm_judge(fake, price_in="0", price_out="1000")
    workers("w1")
    run = judge_run_start(
        judge=judge, study=cast.study, user=cast.researcher, budget_usd=Decimal("0.08")
    )
    wait_for(lambda: run_status(run) == "budget", 60)
    time.sleep(0.5)
    calls = JudgeCall.objects.filter(run=run)
    assert calls.filter(status="done").count() == 3
    assert calls.filter(status="pending").count() == 9
    assert sum(fake.requests().values()) == 3
    assert len(pairs) == 6


def test_the_rate_limit_holds_across_two_worker_processes(cast, fake, api_key, workers):
    pairs = make_marked_pairs(cast.study, 6)
    limit, window = 4, float(FAST_ENV["CONCORD_JUDGE_RATE_WINDOW_SECONDS"])
    judge = make_llm_judge(fake, rpm=limit)
    first, second = workers("left"), workers("right")
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    wait_for(lambda: run_status(run) == "done", 60, lambda: explain(run, first, second))

    assert_each_call_generated_once(run, fake, pairs)
    times = fake.times()
    # Requests are admitted on Redis's clock before the claim, and reach the server after the
    # claim's statements and the request itself: later for a worker's first call, and later
    # still on a loaded machine, where that delay has passed a second. Counting in half the
    # window absorbs up to two seconds of it, while a limit kept per worker would let 2 x 4
    # through in one burst at the start and still be caught.
    slack = window / 2
    most = max(sum(1 for t in times if start <= t < start + window - slack) for start in times)
    assert most <= limit
    assert "succeeded" in first.text() and "succeeded" in second.text()


def test_the_command_starts_a_baseline_run_and_waits_with_a_progress_bar(cast, workers):
    make_marked_pairs(cast.study, 3)
    judge_create(name="coin", kind=Judge.Kind.RANDOM)
    workers("w1")
    cli = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "judge_run",
            "--study",
            cast.study.slug,
            "--judge",
            "coin",
            "--user",
            cast.researcher.username,
            "--seed",
            "4",
            "--wait",
            "--poll",
            "0.2",
        ],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    run = JudgeRun.objects.get(judge__name="coin")
    assert f"run {run.pk} done: 6 done, 0 failed" in cli.stdout
    assert "6/6" in cli.stderr
    assert run.seed == 4


def test_starting_a_run_fails_loudly_when_the_broker_is_down(cast, fake, api_key):
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake)
    cli = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "judge_run",
            "--study",
            cast.study.slug,
            "--judge",
            judge.name,
            "--user",
            cast.researcher.username,
        ],
        cwd=ROOT,
        env=process_env(broker_url="redis://127.0.0.1:1/0"),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert cli.returncode != 0
    assert "broker at redis://127.0.0.1:1/0 does not answer" in cli.stderr
    assert "Nothing was queued" in cli.stderr
    assert not JudgeRun.objects.exists()


def test_a_run_whose_rate_limiter_cannot_reach_redis_names_the_cause_on_its_page_within_a_minute(
    cast, fake, api_key, workers, client
):
    make_marked_pairs(cast.study, 3)
    judge = make_llm_judge(fake, rpm=60)
    # The broker answers; only the rate limiter's Redis does not.
    worker = workers("no-limiter", env={"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    started = time.monotonic()
    wait_for(
        lambda: "Rate limiter cannot reach Redis since" in client.get(page).content.decode(),
        60,
        lambda: explain(run, worker),
        every=1.0,
    )
    html = client.get(page).content.decode()
    assert time.monotonic() - started < 60
    assert "does not answer" in html and "check REDIS_URL" in html
    assert run_status(run) == "running" and not fake.requests()
