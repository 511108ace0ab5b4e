"""The fault suite's machinery: its own Redis, real workers and beat, and the counts it checks.

Everything here is real except the LLM API: a private redis-server (broker and rate limiter) on
a free port, `celery worker` and `celery beat` processes on the test database, PostgreSQL, and
the fake OpenAI server, which here ignores Idempotency-Key as OpenAI does, so a request sent
twice is generated, and paid, twice.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection
from django.db.models import Count, Sum

from judges.llm.client import LATE_DRAIN_SECONDS
from judges.models import JudgeCall, JudgeRun
from judges.services.calls import call_idempotency_key
from tests.judges.fake_openai import FakeOpenAI, Record
from tests.judges.integration import (
    ROOT,
    PrivateRedis,
    WorkerProcess,
    process_env,
    wait_for,
    worker_start,
)

# Short leases, deadlines and grace times: lost work comes back in seconds, and a scenario of
# 300 calls ends in well under a minute on two cores.
SUITE_ENV = {
    "CONCORD_JUDGE_LEASE_SECONDS": "6",
    "CONCORD_JUDGE_TIMEOUT_SECONDS": "2",
    "CONCORD_JUDGE_PENDING_GRACE_SECONDS": "3",
    "CONCORD_JUDGE_BACKOFF_BASE_SECONDS": "0.2",
    "CONCORD_JUDGE_RECONCILE_SECONDS": "1",
    "CONCORD_JUDGE_RATE_WINDOW_SECONDS": "4",
    "CONCORD_JUDGE_MAX_ATTEMPTS": "10",
    "CONCORD_JUDGE_EARLY_TOLERANCE_SECONDS": "0.5",
    # Two calls a message: every scenario runs batches (claimed, sent and recorded together),
    # and a worker's thread has at most two requests in flight.
    "CONCORD_JUDGE_CALL_BATCH": "2",
    # A PL run's scoring lease (a heartbeat every second) and its reconciler every second.
    "CONCORD_REWARD_SCORE_LEASE_SECONDS": "4",
    "CONCORD_REWARD_RECONCILE_SECONDS": "1",
    "LOG_LEVEL": "WARNING",
}
DEADLINE = float(SUITE_ENV["CONCORD_JUDGE_TIMEOUT_SECONDS"])
BATCH = int(SUITE_ENV["CONCORD_JUDGE_CALL_BATCH"])
# How far past its deadline the server may still see a request end: a reader that comes to its
# socket late drains what is already there for at most LATE_DRAIN_SECONDS (judges/llm/client.py:
# the deadline bounds waiting, not reading), and then the client's close reaches the server's
# next read or write (0.05 s polls) a moment later, on a loaded machine.
DEADLINE_SLACK = LATE_DRAIN_SECONDS + 0.5
TERMINAL = {
    JudgeRun.Status.DONE,
    JudgeRun.Status.CANCELLED,
    JudgeRun.Status.BUDGET_REACHED,
    JudgeRun.Status.FAILED,
}


@dataclass
class Cluster:
    """The suite's Redis, its always-on workers and beat, and any extra workers a scenario adds."""

    tmp: Path
    redis: PrivateRedis
    workers: list[WorkerProcess] = field(default_factory=list)
    beat: subprocess.Popen[bytes] | None = None
    count: int = 0

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis.port}/0"

    @property
    def limiter_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis.port}/1"

    def env(self) -> dict[str, str]:
        return SUITE_ENV | {"REDIS_URL": self.limiter_url}

    def worker(
        self,
        *,
        concurrency: int = 4,
        wait: bool = True,
        queues: str = "llm_judge,judge_reconcile",
        pool: str = "threads",
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        self.count += 1
        worker = worker_start(
            self.tmp,
            f"fw{self.count}",
            broker_url=self.broker_url,
            pool=pool,
            concurrency=concurrency,
            env=self.env() | (env or {}),
            queues=queues,
            wait=wait,
        )
        self.workers.append(worker)
        return worker

    def alive(self) -> list[WorkerProcess]:
        return [worker for worker in self.workers if worker.process.poll() is None]

    def threads(self) -> int:
        """Worker threads alive now (each with up to BATCH calls in flight)."""
        return sum(worker.concurrency for worker in self.alive())

    def beat_start(self) -> None:
        log = (self.tmp / "beat.log").open("wb")
        self.beat = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                f"--schedule={self.tmp / 'beat-schedule'}",
                "--loglevel=WARNING",
            ],
            cwd=ROOT,
            env=process_env(broker_url=self.broker_url, **self.env()),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.beat is not None and self.beat.poll() is None:
            self.beat.terminate()
            self.beat.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(worker.text()[-1500:] for worker in self.workers[-3:])


def terminate_backends() -> int:
    """`pg_terminate_backend` on every other connection to the test database (the workers')."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def run_status(run: JudgeRun) -> str:
    return JudgeRun.objects.values_list("status", flat=True).get(pk=run.pk)


def calls_by_status(run: JudgeRun) -> Counter[str]:
    return Counter(JudgeCall.objects.filter(run=run).values_list("status", flat=True))


def wait_terminal(run: JudgeRun, cluster: Cluster, timeout: float = 240) -> None:
    wait_for(
        lambda: run_status(run) in TERMINAL,
        timeout,
        lambda: f"run {run_status(run)}, calls {dict(calls_by_status(run))}\n{cluster.logs()}",
        every=0.5,
    )


def requests_started(fake: FakeOpenAI) -> int:
    return len(fake.snapshot())


@dataclass(frozen=True)
class Counts:
    """What one scenario measured, from the call rows and the fake server's log."""

    scenario: str
    calls: int
    done: int
    failed: int
    pending: int
    requests: int
    paid: int
    lost: int
    duplicated: int
    paid_twice: int
    ledger: int
    ledger_unmatched: int
    early: int
    overlong: int
    run_status: str
    seconds: float
    overlong_found: tuple[str, ...] = ()

    HEADER = (
        "scenario",
        "calls",
        "done",
        "failed",
        "pending",
        "requests",
        "paid",
        "lost",
        "dup",
        "paid 2x",
        "ledger",
        "early",
        "overlong",
        "run",
        "s",
    )

    def row(self) -> tuple[str, ...]:
        return (
            self.scenario,
            str(self.calls),
            str(self.done),
            str(self.failed),
            str(self.pending),
            str(self.requests),
            str(self.paid),
            str(self.lost),
            str(self.duplicated),
            str(self.paid_twice),
            str(self.ledger),
            str(self.early),
            str(self.overlong),
            self.run_status,
            f"{self.seconds:.0f}",
        )


def _early(records: list[Record]) -> int:
    """Requests that reached the server before the Retry-After of the 429 before them."""
    by_key: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_key[record.key].append(record)
    early = 0
    for entries in by_key.values():
        entries.sort(key=lambda record: record.started)
        for before, after in zip(entries, entries[1:], strict=False):
            due = before.at + (before.retry_after or 0) if before.status == 429 else 0
            if after.started < due:
                early += 1
    return early


def measure(scenario: str, runs: list[JudgeRun], fake: FakeOpenAI, started: float) -> Counts:
    """Count a scenario's outcome: every key is one (pair, order), whose call is one row."""
    records = fake.snapshot()
    generated = Counter(record.key for record in records if record.generated)
    calls = list(JudgeCall.objects.filter(run__in=runs).select_related("pair__prompt"))
    keys = {
        call.pk: f"{call.pair.prompt.external_id}:{call.order}"
        for call in calls
        if call.pair is not None
    }
    statuses = Counter(call.status for call in calls)
    expected = sum(run.pairs.count() * 2 for run in runs)
    duplicated = sum(
        row["n"] - 1
        for row in JudgeCall.objects.filter(run__in=runs)
        .values("run_id", "pair_id", "order")
        .annotate(n=Count("pk"))
        if row["n"] > 1
    )
    # Lost: a call row missing, or a call recorded done whose reply the server never made.
    lost = (
        expected
        - len(calls)
        + sum(1 for call in calls if call.status == "done" and not generated[keys[call.pk]])
    )
    paid_twice = sum(max(0, count - 1) for count in generated.values())
    ledger = JudgeCall.objects.filter(run__in=runs).aggregate(n=Sum("unrecorded_requests"))["n"]
    # A call paid more often than once plus what its ledger says: an unrecorded payment.
    ledger_unmatched = sum(
        max(0, generated[keys[call.pk]] - 1 - call.unrecorded_requests) for call in calls
    )
    overlong_found = tuple(overlong_requests(records, calls, fake))
    statuses_runs = {run_status(run) for run in runs}
    return Counts(
        scenario=scenario,
        calls=len(calls),
        done=statuses["done"],
        failed=statuses["failed"],
        pending=statuses["pending"] + statuses["running"],
        requests=len(records),
        paid=sum(generated.values()),
        lost=lost,
        duplicated=duplicated,
        paid_twice=paid_twice,
        ledger=ledger or 0,
        ledger_unmatched=ledger_unmatched,
        early=_early(records),
        overlong=len(overlong_found),
        overlong_found=overlong_found,
        run_status="/".join(sorted(statuses_runs)),
        seconds=time.monotonic() - started,
    )


CAME_BACK = re.compile(r"the worker came back to it ([0-9.]+) s after it")


def overlong_requests(records: list[Record], calls: list[JudgeCall], fake: FakeOpenAI) -> list[str]:
    """The requests that outlived their deadline by more than their client and server were
    kept from running, each described.

    No deadline can end a request while the worker's thread does not run, nor can the server
    see it end while its own threads wait for the CPU: on a loaded two-core machine either can
    stall for most of a second. So a request's allowance is the deadline and its slack, plus
    how late its worker's thread came back to it (the timeout message says so, from
    judges/llm/client.py; a late drain of bytes already received is not in that figure, the
    slack bounds it) and the longest stall of the server's process meanwhile
    (FakeOpenAI.stall_during). What is left is the client's enforcement of the deadline, which
    is what this count checks.
    """
    late: dict[str, float] = {}
    for call in calls:
        given_up = [
            float(found.group(1))
            for entry in call.attempt_errors
            if (found := CAME_BACK.search(str(entry.get("error", ""))))
        ]
        late[call_idempotency_key(call_id=call.pk)] = max(given_up, default=0.0)
    overlong = []
    for record in records:
        took = record.at - record.started
        client = late.get(record.call, 0.0)
        server = fake.stall_during(record.started, record.at)
        if took > DEADLINE + DEADLINE_SLACK + client + server:
            overlong.append(
                f"{record.key} ({record.call}): {took:.2f} s at the server, the worker came back "
                f"{client:.2f} s late, the server stalled {server:.2f} s"
            )
    return overlong


RESULTS: list[Counts] = []


def table(rows: list[Counts]) -> str:
    lines = [Counts.HEADER] + [row.row() for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(Counts.HEADER))]
    out = []
    for index, line in enumerate(lines):
        out.append(" | ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)))
        if index == 0:
            out.append("-+-".join("-" * width for width in widths))
    return "\n".join(out)


def settle(seconds: float) -> None:
    time.sleep(seconds)
