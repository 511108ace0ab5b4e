"""A batch of calls (one message of a run's fan-out): loaded, claimed and recorded with the
same statements whatever its size, each call made once and recorded as it would be alone."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from judges.llm.client import ChatReply
from judges.models import JudgeCall, JudgeRun
from judges.services.calls import (
    call_cost_estimate,
    call_request,
    calls_claim,
    calls_replies_write,
    judge_call_execute,
    judge_calls_execute,
)
from judges.services.runs import judge_run_start
from tests.judges.conftest import make_llm_judge, make_marked_pairs
from tests.judges.test_claims import waiting_on_a_lock

pytestmark = pytest.mark.django_db

VERDICT_FIELDS = (
    "status",
    "raw_output",
    "likert_shown",
    "likert",
    "preference",
    "score_a",
    "score_b",
    "verdict_label",
    "values",
    "parse_error",
    "refusal",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "attempts",
    "unrecorded_requests",
)


def start_run(cast, fake, pairs, name="gpt-fake", **options):
    judge = make_llm_judge(fake, name=name)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher, **options)
    return run, list(run.calls.order_by("pk").values_list("pk", flat=True))


def statements(queries: CaptureQueriesContext) -> list[str]:
    """The statements sent, without those that open and close the transaction (or savepoint)."""
    kinds = [query["sql"].split(" ", 1)[0] for query in queries.captured_queries]
    return [kind for kind in kinds if kind not in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")]


def test_a_batch_of_eight_calls_takes_the_statements_of_one_call(cast, fake, api_key):
    make_marked_pairs(cast.study, 9)
    run, ids = start_run(cast, fake, 9)
    with CaptureQueriesContext(connection) as one:
        assert judge_calls_execute(call_ids=ids[:1])[ids[0]].status == "done"
    with CaptureQueriesContext(connection) as eight:
        outcomes = judge_calls_execute(call_ids=ids[1:9])
    assert {outcome.status for outcome in outcomes.values()} == {"done"}
    # Load (the calls, then their run once), claim, the calls' replies and the run's spend (one
    # transaction), the finish check.
    expected = ["SELECT", "SELECT", "UPDATE", "UPDATE", "UPDATE", "SELECT"]
    assert statements(one) == statements(eight) == expected
    assert JudgeCall.objects.filter(run=run, status="done").count() == 9
    assert fake.requests() and set(fake.requests().values()) == {1}
    assert len(fake.requests()) == 9


def test_calls_made_in_a_batch_are_recorded_as_made_one_by_one(cast, fake, api_key):
    make_marked_pairs(cast.study, 4)
    alone, alone_ids = start_run(cast, fake, 4, name="alone")
    batched, batched_ids = start_run(cast, fake, 4, name="batched")
    for call_id in alone_ids:
        assert judge_call_execute(call_id=call_id).status == "done"
    outcomes = judge_calls_execute(call_ids=batched_ids)
    assert {outcome.status for outcome in outcomes.values()} == {"done"}
    key = ("pair_id", "order")
    one = {tuple(row[:2]): row[2:] for row in alone.calls.values_list(*key, *VERDICT_FIELDS)}
    many = {tuple(row[:2]): row[2:] for row in batched.calls.values_list(*key, *VERDICT_FIELDS)}
    assert one == many and len(many) == 8
    assert all(row[0] == "done" and row[3] is not None for row in many.values())
    for run in (alone, batched):
        run.refresh_from_db()
        spent = sum(run.calls.values_list("cost_usd", flat=True), Decimal(0))
        assert run.spent_usd == spent > 0 and run.status == JudgeRun.Status.DONE


def test_a_batch_writes_only_the_calls_it_still_holds_and_pays_only_for_those(cast, fake, api_key):
    make_marked_pairs(cast.study, 2)
    run, ids = start_run(cast, fake, 2)
    calls = {call.pk: call for call in JudgeCall.objects.filter(pk__in=ids)}
    assert calls_claim(claims=[(pk, 0, {}) for pk in ids], token="mine") == set(ids)
    # The reconciler took one back and another attempt holds it now.
    JudgeCall.objects.filter(pk=ids[0]).update(lease_token="theirs")
    reply = ChatReply(content="2", tokens_in=10, tokens_out=1, model_reported="m", latency_ms=1)
    cost = Decimal("0.5")
    written = calls_replies_write(
        replies=[(calls[pk], reply, cost) for pk in ids], output_format="likert", token="mine"
    )
    assert written == set(ids[1:])
    statuses = dict(JudgeCall.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {ids[0]: "running", **{pk: "done" for pk in ids[1:]}}
    run.refresh_from_db()
    assert run.spent_usd == cost * (len(ids) - 1)


@pytest.mark.django_db(transaction=True)
def test_two_batches_racing_over_shared_calls_claim_each_call_once(cast, fake, api_key):
    make_marked_pairs(cast.study, 2)
    _, ids = start_run(cast, fake, 2)
    first, second = ids[:3], ids[1:]
    results: dict[str, set[int]] = {}

    def other_worker() -> None:
        try:
            results["second"] = calls_claim(claims=[(pk, 0, {}) for pk in second], token="b")
        finally:
            connection.close()

    thread = threading.Thread(target=other_worker)
    with transaction.atomic():
        results["first"] = calls_claim(claims=[(pk, 0, {}) for pk in first], token="a")
        thread.start()
        deadline = time.monotonic() + 10
        while not waiting_on_a_lock():
            assert time.monotonic() < deadline, "the second batch never waited for the lock"
            time.sleep(0.02)
    thread.join(10)
    assert results == {"first": set(first), "second": set(ids[3:])}
    tokens = dict(JudgeCall.objects.filter(pk__in=ids).values_list("pk", "lease_token"))
    assert tokens == {pk: ("a" if pk in first else "b") for pk in ids}


def test_a_batch_claims_no_more_calls_than_the_budget_left_covers(cast, fake, api_key):
    make_marked_pairs(cast.study, 4)
    run, ids = start_run(cast, fake, 4)
    calls = list(JudgeCall.objects.filter(pk__in=ids).select_related("run__judge"))
    estimate = max(
        call_cost_estimate(judge=run.judge, request=call_request(call=call)) for call in calls
    )
    # Room for two calls at their upper estimate, not three.
    JudgeRun.objects.filter(pk=run.pk).update(budget_usd=estimate * 2 + estimate / 2)
    outcomes = judge_calls_execute(call_ids=ids)
    statuses = [outcomes[pk].status for pk in ids]
    assert statuses == ["done", "done"] + ["pending"] * (len(ids) - 2)
    # The others are sent again at once, as calls of their own, and find the budget then.
    assert all(outcomes[pk].retry_in == 0 for pk in ids[2:])
    assert len(fake.requests()) == 2
    assert JudgeCall.objects.filter(pk__in=ids[2:], status="pending", attempts=0).count() == 6
