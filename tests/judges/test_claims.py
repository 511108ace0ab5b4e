"""The claim and the reply's write under real concurrency: two PostgreSQL connections, and a
connection terminated by the server between the claim and the write."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from judges.models import JudgeRun
from judges.services.calls import call_claim, judge_call_execute
from judges.services.runs import judge_run_start
from tests.judges.conftest import make_llm_judge, make_marked_pairs, pair_key
from tests.judges.fake_openai import Fault
from tests.judges.integration import database_url_for_workers

pytestmark = pytest.mark.django_db(transaction=True)


def pending_call(cast, fake):
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    return run, run.calls.order_by("pk").first()


def waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


def test_the_claim_is_one_update_with_its_conditions_on_the_call_row(cast, fake, api_key):
    _, call = pending_call(cast, fake)
    with CaptureQueriesContext(connection) as queries:
        assert call_claim(call_id=call.pk, attempts=0, request={}, token="a")
    (sql,) = [query["sql"] for query in queries.captured_queries]
    assert sql.startswith("UPDATE")
    assert " IN (SELECT" not in sql
    assert '"judges_judgecall"."status" = \'pending\'' in sql


def test_two_connections_racing_for_one_call_see_exactly_one_winner(cast, fake, api_key):
    _, call = pending_call(cast, fake)
    results: dict[str, bool] = {}

    def second_worker() -> None:
        try:
            results["second"] = call_claim(call_id=call.pk, attempts=0, request={}, token="b")
        finally:
            connection.close()

    thread = threading.Thread(target=second_worker)
    with transaction.atomic():
        # The first claim holds the row lock until commit; the second waits on it, and PostgreSQL
        # then re-checks its conditions on the row the first one committed.
        results["first"] = call_claim(call_id=call.pk, attempts=0, request={}, token="a")
        thread.start()
        deadline = time.monotonic() + 10
        while not waiting_on_a_lock():
            assert time.monotonic() < deadline, "the second claim never waited for the lock"
            time.sleep(0.02)
    thread.join(10)
    assert results == {"first": True, "second": False}
    call.refresh_from_db()
    assert (call.status, call.attempts, call.lease_token) == ("running", 1, "a")


def test_a_paid_reply_survives_its_database_connection_being_terminated(cast, fake, api_key):
    run, call = pending_call(cast, fake)
    JudgeRun.objects.filter(pk=run.pk).update(budget_usd=Decimal(10))
    fake.honour_idempotency = False
    connection.ensure_connection()
    backend_pid = connection.connection.info.backend_pid

    def terminate() -> None:
        # While the request is with the API, the server drops the worker's connection.
        with psycopg.connect(database_url_for_workers(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [backend_pid])

    fake.inject(Fault("hook", key=pair_key(call.pair, call.order), hook=terminate))
    outcome = judge_call_execute(call_id=call.pk)

    assert outcome.status == "done"
    assert connection.connection.info.backend_pid != backend_pid
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == "done" and call.likert == 2 and call.unrecorded_requests == 0
    assert run.spent_usd == call.cost_usd > 0 and run.exposure_usd == 0
    assert fake.generations() == {pair_key(call.pair, call.order): 1}
