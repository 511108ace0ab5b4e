"""Many workers claiming at once on PostgreSQL: overlap holds exactly, nobody gets a pair twice.

Each thread has its own database connection, so the claims really race in the database.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import TypeVar

import pytest
from django.db import connection

from annotation.models import Assignment, HumanJudgment, Study, Worker
from annotation.services.assignments import assignment_claim_next
from tests.annotation.work_helpers import make_pairs, make_worker, submit

T = TypeVar("T")


def in_own_connection(work: Callable[[], T]) -> Callable[[], T]:
    def run() -> T:
        try:
            return work()
        finally:
            connection.close()

    return run


def live_study(slug: str, *, overlap: int) -> Study:
    return Study.objects.create(
        slug=slug,
        name=slug,
        status=Study.Status.LIVE,
        overlap=overlap,
        gold_share=Decimal(0),
        target_per_worker=10_000,
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_fifty_workers_on_500_pairs_judge_every_pair_exactly_overlap_times() -> None:
    study = live_study("race", overlap=3)
    make_pairs(study, 500)
    workers = [make_worker(study, f"w{i}") for i in range(50)]
    start = threading.Barrier(len(workers))

    def work_until_done(worker: Worker) -> Callable[[], int]:
        def loop() -> int:
            start.wait()
            done = 0
            while (assignment := assignment_claim_next(worker=worker)) is not None:
                submit(assignment, likert_shown=1 + done % 8)
                done += 1
            return done

        return in_own_connection(loop)

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(work_until_done(worker)) for worker in workers]
        done_counts = [future.result(timeout=120) for future in futures]

    assert sum(done_counts) == 1500
    per_pair = Counter(HumanJudgment.objects.filter(study=study).values_list("pair", flat=True))
    assert len(per_pair) == 500
    assert set(per_pair.values()) == {3}
    distinct = set(HumanJudgment.objects.filter(study=study).values_list("pair", "worker"))
    assert len(distinct) == 1500
    assert not Assignment.objects.filter(study=study, status=Assignment.Status.RESERVED).exists()
    # Nobody sat idle while others worked: the load spreads over the workers.
    assert sum(1 for n in done_counts if n > 0) >= 40


@pytest.mark.django_db(transaction=True)
def test_five_workers_at_once_on_three_pairs_get_different_pairs_or_no_work() -> None:
    study = live_study("rush", overlap=1)
    make_pairs(study, 3)
    workers = [make_worker(study, f"w{i}") for i in range(5)]
    start = threading.Barrier(len(workers))

    def claim_once(worker: Worker) -> Callable[[], int | None]:
        def claim() -> int | None:
            start.wait()
            assignment = assignment_claim_next(worker=worker)
            return None if assignment is None else assignment.pair_id

        return in_own_connection(claim)

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        results = [f.result(timeout=60) for f in [pool.submit(claim_once(w)) for w in workers]]

    got = [pair_id for pair_id in results if pair_id is not None]
    assert len(got) == 3 and len(set(got)) == 3
    assert results.count(None) == 2


@pytest.mark.django_db(transaction=True)
def test_two_requests_of_one_worker_at_once_get_the_same_reservation() -> None:
    study = live_study("double-click", overlap=3)
    make_pairs(study, 20)
    worker = make_worker(study, "w0")
    for _ in range(5):
        start = threading.Barrier(2)

        def claim_once(start: threading.Barrier = start) -> int:
            start.wait()
            assignment = assignment_claim_next(worker=worker)
            assert assignment is not None
            return assignment.pk

        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(in_own_connection(claim_once)) for _ in range(2)]
            first, second = (future.result(timeout=60) for future in futures)

        assert first == second
        held = Assignment.objects.filter(worker=worker, status=Assignment.Status.RESERVED)
        assert list(held.values_list("pk", flat=True)) == [first]
        held.update(status=Assignment.Status.SUBMITTED)
