"""Judge runs under faults, each on 300 calls, each counted and checked.

Real Celery workers (threads), beat, a private Redis, PostgreSQL and the fake OpenAI server,
which ignores Idempotency-Key as OpenAI does: a request sent twice is generated and paid twice.
Every scenario asserts: no call lost, none duplicated, every run terminal, no request before
its Retry-After time, none longer than its deadline, and every reply paid more than once is on
the run's ledger ("possibly charged twice"); the scenarios without a kill, a dropped connection
or a timeout pay nothing twice at all. The counts of each scenario are printed, and the table
of all of them closes the test session. A last scenario kills the reward_model worker scoring a
PL run and checks that the run is queued again within its lease and finished by another worker,
each answer scored and each pair's call made once.
"""

from __future__ import annotations

import random
import time
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.urls import reverse

from annotation.models import Answer
from judges.models import AnswerScore, JudgeCall, JudgeRun
from judges.reward.services import TrainingRequest, pl_training_execute, pl_training_start
from judges.services.calls import call_idempotency_key
from judges.services.runs import judge_run_cancel, judge_run_resume, judge_run_start
from tests.conftest import PASSWORD
from tests.judges.conftest import make_llm_judge, make_marked_pairs, pair_key
from tests.judges.fake_openai import Fault
from tests.judges.faults.harness import (
    BATCH,
    RESULTS,
    SUITE_ENV,
    TERMINAL,
    Counts,
    calls_by_status,
    measure,
    requests_started,
    run_status,
    table,
    terminate_backends,
    wait_terminal,
)
from tests.judges.integration import broker_purge, wait_for
from tests.judges.reward.conftest import ranked_study

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

PAIRS = 150  # both orders: 300 calls a scenario


def start(cast, fake, **judge_options):
    pairs = make_marked_pairs(cast.study, PAIRS)
    budget = judge_options.pop("budget_usd", None)
    judge = make_llm_judge(fake, **judge_options)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher, budget_usd=budget)
    return run, pairs


def check(name: str, runs, fake, started: float, *, may_pay_twice: bool = False) -> Counts:
    counts = measure(name, runs, fake, started)
    RESULTS.append(counts)
    print(table([counts]))
    assert counts.calls == 2 * PAIRS
    assert counts.lost == 0
    assert counts.duplicated == 0
    assert all(run_status(run) in TERMINAL for run in runs)
    assert counts.early == 0, "a request came before its Retry-After time"
    assert counts.overlong == 0, "requests outlived their deadline: " + "; ".join(
        counts.overlong_found
    )
    assert counts.ledger_unmatched == 0, "a reply was paid twice without the ledger saying so"
    if not may_pay_twice:
        assert counts.paid_twice == 0 and counts.ledger == 0
    return counts


def test_a_clean_run_pays_each_call_exactly_once(suite, paid_fake, cast):
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    wait_terminal(run, suite)
    counts = check("clean", [run], paid_fake, started)
    assert counts.done == counts.paid == counts.requests == 300
    assert run_status(run) == "done"


def test_workers_killed_ten_times_lose_nothing_and_the_ledger_holds_every_double_payment(
    suite, paid_fake, cast
):
    rng = random.Random(15)
    # Requests are in flight most of the time, and the run lasts for ten kills: with BATCH
    # requests in flight per thread it went 9 kills through before the run was done at 1.0 s.
    paid_fake.delay = 1.5
    suite.worker(wait=False)
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    kills = 0
    while kills < 10 and run_status(run) not in TERMINAL:
        time.sleep(rng.uniform(0.3, 1.5))
        # Any worker that is up, at a random moment; its replacement starts at once.
        ready = [worker for worker in suite.alive() if worker.ready()]
        if len(ready) < 2:
            continue
        rng.choice(ready).kill()
        kills += 1
        suite.worker(wait=False)
    wait_terminal(run, suite)
    counts = check("SIGKILL x10", [run], paid_fake, started, may_pay_twice=True)
    assert kills == 10
    assert counts.done == 300
    # Each killed worker had at most 4 threads x BATCH requests in flight; the ledger counts each
    # (one killed before its request left is counted but was not paid twice).
    assert counts.paid_twice <= counts.ledger <= counts.paid_twice + 4 * BATCH * kills
    for worker in suite.alive():
        worker.wait_ready()


def test_a_redis_shutdown_nosave_and_restart_loses_nothing_and_the_page_says_so(
    suite, paid_fake, cast, client
):
    paid_fake.delay = 0.05
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    wait_for(lambda: requests_started(paid_fake) >= 80, 120, suite.logs)
    suite.redis.shutdown()
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    wait_for(lambda: "Broker unreachable since" in client.get(page).content.decode(), 30)
    time.sleep(2)
    suite.redis.start()
    wait_terminal(run, suite)
    counts = check("Redis SHUTDOWN NOSAVE", [run], paid_fake, started)
    assert counts.done == 300
    assert "Broker unreachable since" not in client.get(page).content.decode()


def test_terminated_database_connections_lose_no_paid_reply(suite, paid_fake, cast):
    rng = random.Random(8)
    # Slow enough replies that the run outlasts eight rounds of terminations (about 5 s): with
    # calls sent in batches (0d5c314) a 0.1 s reply let the run finish after six.
    paid_fake.delay = 0.4
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    rounds = terminated = 0
    while rounds < 8 and run_status(run) not in TERMINAL:
        time.sleep(rng.uniform(0.3, 1.0))
        killed = terminate_backends()
        if killed:
            rounds += 1
            terminated += killed
    wait_terminal(run, suite)
    counts = check(
        f"pg_terminate_backend x{rounds} ({terminated} conns)",
        [run],
        paid_fake,
        started,
        may_pay_twice=True,
    )
    assert rounds == 8
    assert counts.done == 300


def test_429s_with_retry_after_are_never_retried_early(suite, paid_fake, cast):
    for seconds in (0.5, 1.0, 2.0):
        paid_fake.inject(Fault("429", retry_after=seconds, times=80))
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    wait_terminal(run, suite)
    counts = check("429 with Retry-After", [run], paid_fake, started)
    assert counts.done == 300 and counts.requests == 300 + 240


def test_bursts_of_5xx_are_retried_until_every_call_is_done(suite, paid_fake, cast):
    paid_fake.inject(Fault("500", times=60))
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    for burst_at in (100, 200):

        def reached(count: int = burst_at) -> bool:
            return requests_started(paid_fake) >= count

        wait_for(reached, 120, suite.logs)
        paid_fake.inject(Fault("500", times=60))
    wait_terminal(run, suite)
    counts = check("5xx bursts", [run], paid_fake, started)
    assert counts.done == 300 and counts.requests == 300 + 180


def test_timeouts_and_trickled_replies_end_at_the_deadline_and_are_on_the_ledger(
    suite, paid_fake, cast
):
    paid_fake.inject(Fault("slow", seconds=4.0, times=25))
    paid_fake.inject(Fault("trickle", seconds=5.0, times=25))
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    wait_terminal(run, suite)
    counts = check("timeouts + trickled", [run], paid_fake, started, may_pay_twice=True)
    assert counts.done == 300
    # The API generated (and billed) each reply the client stopped waiting for: 50 paid twice,
    # each on the ledger, and nothing else.
    assert counts.paid_twice == counts.ledger == 50
    aborted = [record for record in paid_fake.snapshot() if record.aborted]
    assert len(aborted) == 50


def test_garbage_and_unparseable_replies_are_retried_or_kept_with_their_error(
    suite, paid_fake, cast
):
    paid_fake.inject(Fault("garbage", times=40))
    paid_fake.inject(Fault("truncated", times=40))
    started = time.monotonic()
    run, pairs = start(cast, paid_fake)
    for pair in pairs[:20]:
        paid_fake.replies[pair_key(pair, "ab")] = "likert_prose_only"
    for pair in pairs[20:30]:
        paid_fake.replies[pair_key(pair, "ba")] = "content_filter"
    wait_terminal(run, suite)
    counts = check("garbage + unparseable", [run], paid_fake, started)
    assert counts.done == 300 and counts.requests == 300 + 80
    calls = JudgeCall.objects.filter(run=run)
    assert calls.filter(parse_error__contains="no score").count() == 20
    assert calls.filter(refusal=True, parse_error__contains="content filter").count() == 10


def test_a_cancelled_run_sends_nothing_until_resumed_and_then_each_call_once(
    suite, paid_fake, cast
):
    paid_fake.delay = 0.05
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    wait_for(lambda: requests_started(paid_fake) >= 100, 120, suite.logs)
    judge_run_cancel(run=run, user=cast.researcher)
    wait_for(lambda: calls_by_status(run)["running"] == 0, 30)
    at_cancel = requests_started(paid_fake)
    time.sleep(3)  # the reconciler runs three times meanwhile
    assert requests_started(paid_fake) == at_cancel
    assert run_status(run) == "cancelled" and calls_by_status(run)["pending"] > 0
    judge_run_resume(run=run, user=cast.researcher)
    wait_terminal(run, suite)
    counts = check("cancel + resume", [run], paid_fake, started)
    assert counts.done == counts.paid == counts.requests == 300


def test_the_budget_cap_stops_the_run_and_counts_every_paid_call(suite, paid_fake, cast):
    # 31 output tokens at 1000 USD per million: 0.031 USD a call; the cap is 100 calls' worth.
    per_call = Decimal("0.031")
    started = time.monotonic()
    run, _ = start(cast, paid_fake, price_in="0", price_out="1000", budget_usd=per_call * 100)
    wait_terminal(run, suite)
    wait_for(lambda: calls_by_status(run)["running"] == 0, 30)
    counts = check("budget cap", [run], paid_fake, started)
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.BUDGET_REACHED
    recorded = JudgeCall.objects.filter(run=run).aggregate(total=Sum("cost_usd"))["total"]
    assert run.spent_usd == recorded
    # Calls already claimed when the cap was reached still finish: at most one per thread.
    assert 100 <= counts.done <= 100 + suite.threads()
    assert counts.paid == counts.done and counts.pending == 300 - counts.done


def test_a_killed_worker_scoring_a_pl_run_is_replaced_within_its_lease_not_the_hour(
    suite, cast, client, settings, tmp_path
):
    """SIGKILL the reward_model worker (parent and child, as a crash would) mid-scoring.

    Its message stays unacknowledged in Redis for the visibility timeout (an hour); the run must
    instead be queued again once its lease runs out, and a second worker must finish it from the
    scores already stored: one score per answer, the first worker's kept as they were, one call
    per pair derived from them.
    """
    settings.CONCORD_REWARD_ARTIFACTS_DIR = tmp_path / "models"
    settings.CONCORD_REWARD_CACHE_DIR = tmp_path / "cache-test"
    lease = float(SUITE_ENV["CONCORD_REWARD_SCORE_LEASE_SECONDS"])
    reconcile = float(SUITE_ENV["CONCORD_REWARD_RECONCILE_SECONDS"])
    broker_purge(suite.broker_url, "reward_model")
    pairs = ranked_study(cast.study, prompts=8)
    answers = Answer.objects.filter(prompt__study=cast.study).count()
    request = TrainingRequest(name="pl-faults", epochs=10, hidden=32, batch_size=8, seed=5)
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert pl_training_execute(training_id=training.pk) == "done"
    training.refresh_from_db()
    assert training.judge is not None
    # The workers encode afresh (a cache of their own) in batches of 4: eight batches to kill in.
    worker_env = {
        "CONCORD_REWARD_ARTIFACTS_DIR": str(tmp_path / "models"),
        "CONCORD_REWARD_CACHE_DIR": str(tmp_path / "cache-workers"),
        "CONCORD_REWARD_SCORE_BATCH": "4",
    }
    reward = {"queues": "reward_model", "pool": "prefork", "concurrency": 1, "env": worker_env}
    run = judge_run_start(judge=training.judge, study=cast.study, user=cast.researcher)
    first = suite.worker(wait=False, **reward)
    second = None
    try:

        def scoring_and_beating() -> bool:
            row = JudgeRun.objects.get(pk=run.pk)
            beat, began = row.score_heartbeat_at, row.started_at
            return (
                row.status == JudgeRun.Status.PENDING
                and bool(row.score_lease_token)
                and beat is not None
                and began is not None
                and (beat - began).total_seconds() >= lease / 4
                and AnswerScore.objects.filter(run=run).count() >= 8
            )

        # The worker claimed the run, its heartbeat renewed the lease, two batches are stored.
        wait_for(scoring_and_beating, 180, first.text, every=0.05)
        assert client.login(username=cast.researcher.username, password=PASSWORD)
        progress = reverse("judges:run_progress", args=[cast.study.slug, run.pk])
        assert client.get(progress).json()["scoring"].startswith("Scoring, last heartbeat")
        first.kill()
        killed = time.monotonic()
        before = dict(AnswerScore.objects.filter(run=run).values_list("pk", "score"))
        assert 8 <= len(before) < answers, "the kill came after the scoring"
        row = JudgeRun.objects.get(pk=run.pk)
        assert row.score_attempts == 1
        last_beat = row.score_heartbeat_at
        assert last_beat is not None

        def lost_and_requeued() -> bool:
            return client.get(progress).json()["scoring"].startswith("Worker lost, re-queued at")

        wait_for(lost_and_requeued, 60, lambda: client.get(progress).json()["scoring"])
        requeued = time.monotonic() - killed
        row = JudgeRun.objects.get(pk=run.pk)
        assert row.status == JudgeRun.Status.PENDING and row.score_requeued_at is not None
        # Re-queued within the lease and a reconciler round of the last heartbeat (and slack
        # for a loaded machine), not after the broker's visibility timeout.
        late = (row.score_requeued_at - last_beat).total_seconds()
        assert late <= lease + reconcile + 3, f"re-queued {late:.1f} s after the last heartbeat"
        second = suite.worker(wait=False, **reward)
        wait_for(
            lambda: run_status(run) in TERMINAL,
            600,
            lambda: f"run {run_status(run)}\n{second.text()[-3000:]}" if second else "",
            every=0.2,
        )
        finished = time.monotonic() - killed
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.stop()
    run.refresh_from_db()
    scores = dict(AnswerScore.objects.filter(run=run).values_list("answer_id", "score"))
    calls = list(JudgeCall.objects.filter(run=run).select_related("pair"))
    print(
        f"\nPL worker killed: {len(before)} of {answers} answers scored before the kill, "
        f"re-queued {requeued:.1f} s after it ({late:.1f} s after the last heartbeat), "
        f"done {finished:.1f} s after it, {run.score_attempts} attempts, "
        f"{len(calls)} calls for {len(pairs)} pairs"
    )
    assert run.status == JudgeRun.Status.DONE, run.note
    # The second attempt's heartbeat kept its lease: no third claim.
    assert run.score_attempts == 2
    # Bounded by the lease, a reconciler round, a worker's start and the rest of the scoring
    # (a minute or two on a loaded two-core machine), far below the visibility timeout.
    assert finished < 600 < settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    # Every answer scored once; what the killed worker stored was kept, not scored again.
    assert len(scores) == answers
    kept = dict(AnswerScore.objects.filter(pk__in=list(before)).values_list("pk", "score"))
    assert kept == before
    # Every pair's call made once, from the stored scores of its two answers.
    assert len(calls) == len({call.pair_id for call in calls}) == len(pairs)
    for call in calls:
        assert call.status == JudgeCall.Status.DONE and call.pair is not None
        assert (call.score_a, call.score_b) == (
            scores[call.pair.answer_a_id],
            scores[call.pair.answer_b_id],
        )
    assert "Worker lost" not in client.get(progress).json()["scoring"]


def test_calls_taken_back_from_a_killed_worker_are_sent_again_ahead_of_the_backlog(
    suite, paid_fake, cast
):
    """SIGKILL one of the two workers early in a 300-call run, with most of the run still queued.

    Its calls in flight are taken back when their lease runs out and sent again on the broker's
    first priority step: each one's second request must come within the lease, a reconciler
    round and a call or two of its first, not after the backlog (at the tail they waited for
    all of it: 79-150 s with a 12 s lease). Measured on the calls the ledger counts as
    possibly paid twice, from the fake server's log.
    """
    # 8 threads x BATCH calls at a call a second: the run's 300 calls take 20 s or more.
    paid_fake.delay = 1.0
    lease = float(SUITE_ENV["CONCORD_JUDGE_LEASE_SECONDS"])
    reconcile = float(SUITE_ENV["CONCORD_JUDGE_RECONCILE_SECONDS"])
    started = time.monotonic()
    run, _ = start(cast, paid_fake)
    wait_for(lambda: requests_started(paid_fake) >= 24, 120, suite.logs)
    ready = [worker for worker in suite.alive() if worker.ready()]
    assert len(ready) >= 2
    # Kill only while every thread of both workers holds a full batch, so the killed one holds
    # some (a kill between two calls of a thread-starved worker took back nothing: CI, once;
    # with calls in batches, one worker's threads alone can hold as many calls as there are
    # threads in all, and a kill of the other took back nothing: a clean-clone run, once).
    wait_for(
        lambda: (
            JudgeCall.objects.filter(run=run, status="running").count() >= suite.threads() * BATCH
        ),
        60,
        suite.logs,
        every=0.05,
    )
    ready[0].kill()
    killed = time.time()
    never_sent = JudgeCall.objects.filter(run=run, status="pending", attempts=0).count()
    # Its replacement starts at once, as in production; until it is up, 4 threads remain.
    suite.worker(wait=False)
    wait_terminal(run, suite)
    counts = check("kill under backlog", [run], paid_fake, started, may_pay_twice=True)
    assert counts.done == 300
    records = paid_fake.snapshot()
    by_call: dict[str, list[float]] = {}
    for record in records:
        by_call.setdefault(record.call, []).append(record.started)
    taken_back = list(JudgeCall.objects.filter(run=run, unrecorded_requests__gte=1))
    assert taken_back, "the killed worker held no call"
    gaps = []
    for call in taken_back:
        sent = sorted(by_call.get(call_idempotency_key(call_id=call.pk), []))
        # A call claimed but killed before its request left has one request: nothing to measure.
        if len(sent) >= 2:
            gaps.append(sent[1] - sent[0])
    assert gaps, "no taken-back call had reached the server before the kill"
    bound = lease + reconcile + 2 * paid_fake.delay + 3
    # What the backlog alone would have cost a call sent again at its tail: the calls not yet
    # requested at the kill, on the four threads left.
    backlog = never_sent / (4 * BATCH) * paid_fake.delay
    last_resent = max(
        sorted(by_call[call_idempotency_key(call_id=call.pk)])[1]
        for call in taken_back
        if len(by_call.get(call_idempotency_key(call_id=call.pk), [])) >= 2
    )
    first_after = sum(
        1 for starts in by_call.values() if len(starts) == 1 and min(starts) > last_resent
    )
    print(
        f"\nkill under backlog: {len(taken_back)} calls taken back, second request "
        f"{min(gaps):.1f}-{max(gaps):.1f} s after the first (bound {bound:.0f} s, lease "
        f"{lease:.0f} s); {never_sent} calls never sent at the kill (a backlog of about "
        f"{backlog:.0f} s); {first_after} calls first requested after the last re-send"
    )
    assert backlog > 2 * bound, "the backlog was too short to tell the tail from the head"
    assert max(gaps) <= bound, f"taken-back calls re-sent {max(gaps):.1f} s after their first"
    # Ahead of the backlog: much of the run was first requested after every re-send.
    assert first_after >= 60
    assert killed < last_resent
    for worker in suite.alive():
        worker.wait_ready()
