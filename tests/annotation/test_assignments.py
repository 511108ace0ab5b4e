"""The assignment engine: which pair a worker gets next, and when it goes back to the pool."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Assignment, Study, Worker
from annotation.services.assignments import (
    CLAIM_WINDOW,
    assignment_claim_next,
    assignments_expire,
)
from annotation.services.errors import StudyNotOpen, WorkerBlocked
from tests.annotation.work_helpers import make_pairs, make_worker, submit
from tests.conftest import Cast


def set_study(study: Study, **fields: object) -> None:
    for name, value in fields.items():
        setattr(study, name, value)
    study.save()


def test_claim_reserves_a_pair_of_the_study_for_the_time_limit(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, time_limit_seconds=300)
    (pair,) = make_pairs(cast.study, 1)
    make_pairs(cast.other_study, 2, prefix="o")

    assignment = assignment_claim_next(worker=cast.worker_one)

    assert assignment is not None
    assert assignment.pair == pair
    assert assignment.status == Assignment.Status.RESERVED
    assert assignment.expires_at - assignment.reserved_at == timedelta(seconds=300)


def test_a_worker_holding_a_reservation_gets_the_same_one_back(cast: Cast) -> None:
    set_study(cast.study, gold_share=0)
    make_pairs(cast.study, 5)
    first = assignment_claim_next(worker=cast.worker_one)
    again = assignment_claim_next(worker=cast.worker_one)
    assert first is not None and again is not None
    assert again.pk == first.pk
    assert Assignment.objects.filter(worker=cast.worker_one).count() == 1


def test_open_reservations_count_toward_the_overlap(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=1)
    make_pairs(cast.study, 1)
    assert assignment_claim_next(worker=cast.worker_one) is not None
    assert assignment_claim_next(worker=cast.worker_two) is None


def test_a_second_worker_never_gets_the_pair_the_first_holds(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=1)
    make_pairs(cast.study, 2)
    first = assignment_claim_next(worker=cast.worker_one)
    second = assignment_claim_next(worker=cast.worker_two)
    assert first is not None and second is not None
    assert first.pair_id != second.pair_id


def test_expired_reservation_goes_back_to_the_pool(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=1)
    (pair,) = make_pairs(cast.study, 1)
    held = assignment_claim_next(worker=cast.worker_one)
    assert held is not None
    Assignment.objects.filter(pk=held.pk).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )

    taken_over = assignment_claim_next(worker=cast.worker_two)

    assert taken_over is not None and taken_over.pair == pair
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED


def test_fewest_judged_pairs_come_first(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=3)
    pairs = make_pairs(cast.study, 3)
    helpers = [make_worker(cast.study, f"h{i}") for i in range(3)]
    # pairs[0] has two judgments, pairs[1] one, pairs[2] none.
    for pair, judged_by in ((pairs[0], helpers[:2]), (pairs[1], helpers[2:])):
        for helper in judged_by:
            Assignment.objects.create(
                study=cast.study,
                pair=pair,
                worker=helper,
                a_left=True,
                status=Assignment.Status.SUBMITTED,
                reserved_at=timezone.now(),
                expires_at=timezone.now() + timedelta(minutes=5),
            )
    got = []
    for worker in (cast.worker_one, cast.worker_two):
        assignment = assignment_claim_next(worker=worker)
        assert assignment is not None
        got.append(assignment.pair)
    assert got[0] == pairs[2]
    assert got[1] in (pairs[1], pairs[2])


def test_a_worker_never_gets_a_pair_twice(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=3)
    make_pairs(cast.study, 4)
    seen = []
    while (assignment := assignment_claim_next(worker=cast.worker_one)) is not None:
        seen.append(assignment.pair_id)
        submit(assignment)
    assert len(seen) == 4 and len(set(seen)) == 4


def test_worker_who_reached_the_target_gets_no_more_work(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, target_per_worker=2)
    make_pairs(cast.study, 5)
    for _ in range(2):
        assignment = assignment_claim_next(worker=cast.worker_one)
        assert assignment is not None
        submit(assignment)
    assert assignment_claim_next(worker=cast.worker_one) is None


def test_each_worker_sees_answer_a_on_the_left_half_the_time(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=2, target_per_worker=100)
    make_pairs(cast.study, 20)
    for worker in (cast.worker_one, cast.worker_two):
        shown = []
        while (assignment := assignment_claim_next(worker=worker)) is not None:
            shown.append(assignment.a_left)
            submit(assignment)
        assert len(shown) == 20
        assert shown.count(True) == 10
        # Balanced at every step, not by a fixed alternation that a worker could learn.
        assert all(abs(2 * shown[:n].count(True) - n) <= 1 for n in range(1, 21))


def test_gold_pairs_are_mixed_in_at_the_study_share(cast: Cast) -> None:
    set_study(cast.study, gold_share=1)
    make_pairs(cast.study, 3, gold=2)
    kinds = []
    while (assignment := assignment_claim_next(worker=cast.worker_one)) is not None:
        kinds.append(assignment.pair.is_gold)
        submit(assignment, likert_shown=1 if assignment.a_left else 8)
    # Every claim asks for gold first; when the gold runs out, regular work follows.
    assert kinds == [True, True, False, False, False]


def test_no_gold_is_served_when_the_share_is_zero(cast: Cast) -> None:
    set_study(cast.study, gold_share=0)
    make_pairs(cast.study, 3, gold=3)
    kinds = []
    while (assignment := assignment_claim_next(worker=cast.worker_one)) is not None:
        kinds.append(assignment.pair.is_gold)
        submit(assignment)
    assert kinds == [False, False, False]


def test_the_qualification_block_serves_gold_first(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, qualification_items=2)
    make_pairs(cast.study, 3, gold=3)
    kinds = []
    while (assignment := assignment_claim_next(worker=cast.worker_one)) is not None:
        kinds.append(assignment.pair.is_gold)
        submit(assignment, likert_shown=1 if assignment.a_left else 8)
    assert kinds == [True, True, False, False, False]


def test_a_blocked_worker_is_refused_with_a_clear_message(cast: Cast) -> None:
    make_pairs(cast.study, 2)
    Worker.objects.filter(pk=cast.worker_one.pk).update(state=Worker.State.BLOCKED)
    with pytest.raises(WorkerBlocked, match="check questions"):
        assignment_claim_next(worker=cast.worker_one)


@pytest.mark.parametrize("status", [Study.Status.DRAFT, Study.Status.PAUSED, Study.Status.CLOSED])
def test_a_study_that_is_not_live_hands_out_no_work(cast: Cast, status: str) -> None:
    make_pairs(cast.study, 2)
    set_study(cast.study, status=status)
    with pytest.raises(StudyNotOpen):
        assignment_claim_next(worker=cast.worker_one)


def test_assignments_expire_marks_only_reservations_past_their_time(cast: Cast) -> None:
    set_study(cast.study, gold_share=0, overlap=1)
    make_pairs(cast.study, 2)
    old = assignment_claim_next(worker=cast.worker_one)
    fresh = assignment_claim_next(worker=cast.worker_two)
    assert old is not None and fresh is not None
    Assignment.objects.filter(pk=old.pk).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    assert assignments_expire() == 1
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.status, fresh.status) == (Assignment.Status.EXPIRED, Assignment.Status.RESERVED)


def pair_rows_read() -> tuple[int, int]:
    """Rows of annotation_pair this transaction has read (sequential, by index), and how many
    sequential scans it made (PostgreSQL's per-transaction table statistics)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0), coalesce(seq_scan, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = 'annotation_pair'"
        )
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, 0)


@pytest.mark.django_db
def test_the_claim_functions_plan_their_statements_for_each_calls_values() -> None:
    # Generic plans (migration 0010) walked a 1M-pair study's window more dearly than plans for
    # the call's own values; 0011 undid them: the functions carry no plan_cache_mode.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname, proconfig FROM pg_proc WHERE proname IN "
            "('annotation_claim_pass', 'annotation_claim_reserve') ORDER BY proname"
        )
        rows = cursor.fetchall()
    assert rows == [("annotation_claim_pass", None), ("annotation_claim_reserve", None)]


def test_the_claim_reads_a_bounded_window_and_never_sorts_the_pool_at_random(
    cast: Cast,
) -> None:
    set_study(cast.study, gold_share=0)
    make_pairs(cast.study, 3000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_pair")
    before_rows, before_scans = pair_rows_read()
    with CaptureQueriesContext(connection) as queries:
        assert assignment_claim_next(worker=cast.worker_one) is not None
    after_rows, after_scans = pair_rows_read()
    # One round trip: the whole pass is the PL/pgSQL function.
    assert [q["sql"].split("(")[0] for q in queries] == ["SELECT * FROM annotation_claim_pass"]
    # Two index walks of at most CLAIM_WINDOW keys and the locked pair, never the whole pool.
    assert after_scans == before_scans
    assert 0 < after_rows - before_rows <= 2 * CLAIM_WINDOW + 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'annotation_claim_pass'")
        (source,) = cursor.fetchone()
    assert "random()" not in source.lower()
    assert "SKIP LOCKED" in source


def index_used(sql: str, params: list[int]) -> tuple[str, list[str]]:
    """The one index on annotation_assignment that `sql`'s plan reads, and its key columns."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        (name,) = {
            line.split(" using ")[1].split(" on ")[0]
            for line in plan.splitlines()
            if " using " in line and " on annotation_assignment" in line
        }
        cursor.execute(
            "SELECT a.attname FROM pg_index i "
            "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, n) ON true "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indexrelid = %s::regclass ORDER BY k.n",
            [name],
        )
        return name, [row[0] for row in cursor.fetchall()]


def test_a_pairs_taken_slots_are_counted_through_an_index_that_leads_with_the_pair(
    cast: Cast,
) -> None:
    # Statistics taken while the table was empty, as on a new deployment's first study: with
    # them, the planner took the (worker, pair) unique index for "pair_id = x" and walked all of
    # it for each of the window's 32 pairs (2.2 ms a claim on 2,400 assignments, 0.55 after an
    # ANALYZE). Leading the unique index with the pair leaves it no index but a pair-first one.
    set_study(cast.study, gold_share=0)
    pairs = make_pairs(cast.study, 2000)
    workers = [make_worker(cast.study, f"w{i}") for i in range(8)]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_assignment")
        cursor.execute("ANALYZE annotation_pair")
    now = timezone.now()
    Assignment.objects.bulk_create(
        Assignment(
            study=cast.study,
            pair=pair,
            worker=worker,
            a_left=True,
            status=Assignment.Status.SUBMITTED,
            reserved_at=now,
            expires_at=now + timedelta(minutes=10),
        )
        for i, worker in enumerate(workers)
        for pair in pairs[i * 250 : (i + 1) * 250 + 50]
    )
    # The window's shape (migration 0008): each pair of the walk with its taken slots.
    window = (
        "SELECT p.id, t.taken FROM annotation_pair p CROSS JOIN LATERAL ("
        " SELECT count(*) AS taken FROM annotation_assignment a WHERE a.pair_id = p.id"
        " AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > now()))"
        ") t WHERE p.study_id = %s AND NOT p.is_gold ORDER BY p.shuffle_key LIMIT 32"
    )
    name, columns = index_used(window, [cast.study.pk])
    assert columns[0] == "pair_id", (name, columns)
    # A worker's open reservation: the partial index of open reservations, not a status index.
    held = (
        "SELECT 1 FROM annotation_assignment r WHERE r.worker_id = %s "
        "AND r.status = 'reserved' AND r.expires_at > now()"
    )
    assert index_used(held, [workers[0].pk])[0] == "assignment_worker_reserved"


@pytest.mark.django_db
@pytest.mark.parametrize("table", ["annotation_assignment", "annotation_humanjudgment"])
def test_the_write_path_tables_carry_no_index_that_another_one_leads_with(table: str) -> None:
    # Each index is written on every claim and every submit; one whose leading columns another
    # index already starts with only costs writes (the raw one-statement claim of
    # benchmarks/bench_claim.py went from 691-706 to 803-825 claims/s without the three).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indkey::text, i.indpred IS NOT NULL, i.indisunique "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %s::regclass",
            [table],
        )
        indexes = cursor.fetchall()
    plain = [(name, key.split()) for name, key, partial, unique in indexes if not partial]
    for name, key in plain:
        for other, other_key in plain:
            if other != name and len(key) < len(other_key) and other_key[: len(key)] == key:
                pytest.fail(f"{name} ({key}) is a prefix of {other} ({other_key})")
