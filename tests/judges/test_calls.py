"""One call at a time, made in this process against the fake server over real HTTP."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from core.broker import task_send
from core.queues import Queue
from judges.llm.client import UnsafeBaseURL, chat_complete
from judges.models import Judge, JudgeCall, JudgeRun
from judges.selectors.runs import judge_run_progress
from judges.services.calls import (
    budget_reached,
    call_claim,
    call_cost_estimate,
    call_request,
    judge_call_execute,
    run_cost,
)
from judges.services.judges import judge_create, judge_readiness
from judges.services.runs import (
    JudgeNotReady,
    judge_calls_reconcile,
    judge_run_cancel,
    judge_run_fan_out,
    judge_run_resume,
    judge_run_start,
)
from tests.judges.conftest import KEY_ENV, make_llm_judge, make_marked_pairs, pair_key
from tests.judges.fake_openai import Fault
from tests.judges.integration import broker_purge, free_port, judge_queue_messages

pytestmark = pytest.mark.django_db


def start(cast, judge, count=1, **kwargs):
    pairs = make_marked_pairs(cast.study, count)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher, **kwargs)
    return run, pairs


def call_of(run, pair, order="ab"):
    return JudgeCall.objects.get(run=run, pair=pair, order=order)


def test_run_start_creates_one_pending_call_per_pair_and_order(cast, fake, api_key):
    run, pairs = start(cast, make_llm_judge(fake), count=3)
    assert run.status == JudgeRun.Status.RUNNING
    assert sorted(run.calls.values_list("pair_id", "order")) == sorted(
        (pair.pk, order) for pair in pairs for order in ("ab", "ba")
    )
    assert set(run.calls.values_list("status", flat=True)) == {"pending"}


def test_fixed_and_random_order_policies_make_one_call_per_pair(cast, fake, api_key):
    fixed = make_llm_judge(fake, name="fixed", order_policy=Judge.OrderPolicy.FIXED)
    run, _ = start(cast, fixed, count=4)
    assert set(run.calls.values_list("order", flat=True)) == {"ab"}
    one = make_llm_judge(fake, name="one", order_policy=Judge.OrderPolicy.RANDOM)
    first = judge_run_start(judge=one, study=cast.study, user=cast.researcher, seed=5)
    again = judge_run_start(judge=one, study=cast.study, user=cast.researcher, seed=5)
    assert first.calls.count() == 4
    orders = list(first.calls.order_by("pair_id").values_list("order", flat=True))
    assert orders == list(again.calls.order_by("pair_id").values_list("order", flat=True))


def test_a_call_records_the_canonical_likert_the_request_as_sent_and_its_cost(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.replies[pair_key(pair, "ba")] = "likert_first_better"
    for order in ("ab", "ba"):
        assert judge_call_execute(call_id=call_of(run, pair, order).pk).status == "done"
    ab, ba = call_of(run, pair, "ab"), call_of(run, pair, "ba")
    assert (ab.likert_shown, ab.likert, ab.preference) == (2, 2, "A")
    # Shown B first and told "the first is better", the judge preferred B: 9 - 2 = 7.
    assert (ba.likert_shown, ba.likert, ba.preference) == (2, 7, "B")
    assert ab.raw_output.startswith("2\nThe first reply")
    content = ab.request["messages"][0]["content"]
    assert content.index(f"(ref {pair.prompt.external_id}-A)") < content.index("-B)")
    assert api_key not in str(ab.request)
    assert ab.tokens_in > 0 and ab.tokens_out == 31
    expected = (Decimal(ab.tokens_in) * 10 + Decimal(31) * 30) / Decimal(1_000_000)
    assert ab.cost_usd == expected.quantize(Decimal("0.00000001"))
    assert ab.model_version_reported == "gpt-4-fake"
    assert ab.attempts == 1
    assert run.__class__.objects.get(pk=run.pk).status == JudgeRun.Status.DONE


def test_a_redelivered_call_does_nothing_and_is_not_paid_twice(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    call = call_of(run, pair)
    judge_call_execute(call_id=call.pk)
    assert judge_call_execute(call_id=call.pk).status == "skipped"
    assert fake.requests()[pair_key(pair, "ab")] == 1


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("likert_out_of_range", "outside 1-8"),
        ("likert_zero", "outside 1-8"),
        ("likert_two_scores", "more than one number"),
        ("likert_prose_only", "no score"),
    ],
)
def test_an_unparseable_reply_is_kept_with_its_parse_error(cast, fake, api_key, reply, error):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.default_reply = reply
    call = call_of(run, pair)
    judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert call.status == JudgeCall.Status.DONE
    assert error in call.parse_error
    assert call.likert is None and call.preference == ""
    assert call.raw_output and call.cost_usd > 0


@pytest.mark.parametrize("reply", ["refusal_text", "refusal_api"])
def test_a_refusal_is_recorded_not_retried(cast, fake, api_key, reply):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.default_reply = reply
    call = call_of(run, pair)
    outcome = judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert outcome.retry_in is None
    assert call.refusal and call.parse_error.startswith("refusal")
    assert "can't" in call.raw_output
    assert judge_run_progress(run=run).refusals == 1


@pytest.mark.parametrize(
    ("template", "reply", "fields"),
    [
        ("two_scores", "two_scores", {"score_a": 5.0, "score_b": 8.0, "preference": "B"}),
        ("verdict", "verdict_first", {"verdict_label": "[[A]]", "preference": "B"}),
        ("verdict", "verdict_tie", {"preference": "tie"}),
        ("values", "values_second", {"values": ["empathy", "actionability"], "preference": "A"}),
    ],
)
def test_other_templates_store_their_verdict_in_canonical_terms(
    cast, fake, api_key, template, reply, fields
):
    run, (pair,) = start(cast, make_llm_judge(fake, template=template))
    fake.default_reply = reply
    call = call_of(run, pair, "ba")
    judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert call.parse_error == ""
    for name, value in fields.items():
        assert getattr(call, name) == value


@pytest.mark.parametrize("kind", ["429", "500", "garbage"])
def test_a_transient_error_puts_the_call_back_to_pending_with_a_retry_time(
    cast, fake, api_key, kind
):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.inject(Fault(kind, retry_after=7 if kind == "429" else None))
    call = call_of(run, pair)
    outcome = judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert outcome.status == "pending" and outcome.retry_in is not None
    assert call.status == JudgeCall.Status.PENDING and call.attempts == 1
    assert "attempt 1" in call.error
    if kind == "429":
        assert outcome.retry_in >= 7
    assert call.not_before >= timezone.now() + timedelta(seconds=outcome.retry_in - 1)
    # Once the retry time has come (here: moved to now), the next message makes the call.
    JudgeCall.objects.filter(pk=call.pk).update(not_before=timezone.now())
    assert judge_call_execute(call_id=call.pk).status == "done"
    call.refresh_from_db()
    assert call.attempts == 2 and call.likert == 2 and call.not_before is None


def test_a_message_that_comes_before_the_retry_after_time_sends_nothing(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.inject(Fault("429", retry_after=30))
    call = call_of(run, pair)
    judge_call_execute(call_id=call.pk)
    # A second message for the same call (a redelivery, a reconciler's copy) arrives at once.
    outcome = judge_call_execute(call_id=call.pk)
    assert outcome.status == "skipped" and "retry not due" in outcome.detail
    assert sum(fake.requests().values()) == 1


def test_a_message_just_before_the_retry_time_waits_for_it(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    call = call_of(run, pair)
    JudgeCall.objects.filter(pk=call.pk).update(not_before=timezone.now() + timedelta(seconds=1))
    outcome = judge_call_execute(call_id=call.pk)
    assert outcome.status == "pending" and outcome.retry_in is not None
    assert 0 < outcome.retry_in <= 1
    assert not fake.requests()


def test_the_claim_is_refused_before_the_retry_time_even_to_a_worker_that_skipped_the_check(
    cast, fake, api_key
):
    run, (pair,) = start(cast, make_llm_judge(fake))
    call = call_of(run, pair)
    JudgeCall.objects.filter(pk=call.pk).update(not_before=timezone.now() + timedelta(seconds=30))
    assert not call_claim(call_id=call.pk, attempts=0, request={}, token="t1")
    JudgeCall.objects.filter(pk=call.pk).update(not_before=timezone.now())
    assert call_claim(call_id=call.pk, attempts=0, request={}, token="t1")


def test_a_transient_error_gives_up_after_the_maximum_attempts(cast, fake, api_key, settings):
    settings.CONCORD_JUDGE_MAX_ATTEMPTS = 2
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.inject(Fault("500", times=5))
    call = call_of(run, pair)
    judge_call_execute(call_id=call.pk)
    JudgeCall.objects.filter(pk=call.pk).update(not_before=timezone.now())
    assert judge_call_execute(call_id=call.pk).status == "failed"
    call.refresh_from_db()
    assert call.status == JudgeCall.Status.FAILED and "gave up after 2 attempts" in call.error


def test_a_wrong_key_is_a_permanent_error_and_not_retried(cast, fake, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong")
    run, (pair,) = start(cast, make_llm_judge(fake))
    call = call_of(run, pair)
    outcome = judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert outcome.status == "failed" and outcome.retry_in is None
    assert "HTTP 401" in call.error
    assert "sk-wrong" not in call.error and "sk-wrong" not in str(call.request)


def test_a_redirect_is_not_followed(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.inject(Fault("redirect"))
    call = call_of(run, pair)
    judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert call.status == JudgeCall.Status.FAILED
    assert "redirect" in call.error and "169.254.169.254" in call.error
    assert fake.requests()[pair_key(pair, "ab")] == 1


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/v1",
        "http://10.0.0.8:8000/v1",
        "https://api.openai.com.evil.example/v1",
        "http://user:pw@127.0.0.1/v1",
    ],
)
def test_a_base_url_off_the_allow_list_is_refused_on_save_and_on_call(url):
    with pytest.raises(ValidationError) as info:
        judge_create(
            name="bad",
            kind=Judge.Kind.LLM,
            model_name="m",
            base_url=url,
            api_key_env=KEY_ENV,
            template_name="likert",
        )
    assert "base_url" in info.value.message_dict
    with pytest.raises(UnsafeBaseURL):
        chat_complete(
            base_url=url,
            api_key="k",
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            params={},
            idempotency_key="x",
            timeout=1,
        )


def test_the_allow_list_comes_from_the_settings(settings):
    settings.CONCORD_JUDGE_HOST_ALLOWLIST = ["llm.internal.example"]
    judge = judge_create(
        name="vllm",
        kind=Judge.Kind.LLM,
        model_name="m",
        base_url="http://llm.internal.example:8000/v1",
        api_key_env=KEY_ENV,
        template_name="likert",
    )
    assert judge.pk is not None


def test_without_its_key_a_judge_is_not_configured_and_its_runs_refuse_to_start(
    cast, fake, monkeypatch
):
    monkeypatch.delenv(KEY_ENV, raising=False)
    judge = make_llm_judge(fake)
    assert judge_readiness(judge=judge) == f"not configured: set {KEY_ENV}"
    make_marked_pairs(cast.study, 1)
    with pytest.raises(JudgeNotReady, match=f"set {KEY_ENV}"):
        judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert not JudgeRun.objects.exists()


@pytest.mark.parametrize("kind", [Judge.Kind.RANDOM, Judge.Kind.LONGER])
def test_baselines_run_without_any_key(cast, monkeypatch, kind):
    monkeypatch.delenv(KEY_ENV, raising=False)
    judge = judge_create(name=f"baseline-{kind}", kind=kind)
    assert judge_readiness(judge=judge) == ""
    run, (pair,) = start(cast, judge, seed=3)
    for call in run.calls.all():
        judge_call_execute(call_id=call.pk)
    ab, ba = call_of(run, pair, "ab"), call_of(run, pair, "ba")
    assert ab.status == ba.status == JudgeCall.Status.DONE and ab.cost_usd == 0
    if kind == Judge.Kind.LONGER:
        # B's answer is the longer one, whichever side it was shown on.
        assert ab.preference == ba.preference == "B"


def test_only_members_and_admins_may_start_a_run(cast, fake, api_key):
    judge = make_llm_judge(fake)
    make_marked_pairs(cast.study, 1)
    for user in (cast.outsider, cast.worker_one.user):
        with pytest.raises(PermissionDenied):
            judge_run_start(judge=judge, study=cast.study, user=user)
    with pytest.raises(PermissionDenied):
        judge_run_start(judge=judge, study=cast.other_study, user=cast.researcher)
    assert judge_run_start(judge=judge, study=cast.study, user=cast.admin).pk


def test_pairs_of_another_study_are_refused_by_id(cast, fake, api_key):
    (foreign,) = make_marked_pairs(cast.other_study, 1)
    with pytest.raises(ValidationError, match=str(foreign.pk)):
        judge_run_start(
            judge=make_llm_judge(fake), study=cast.study, user=cast.researcher, pairs=[foreign]
        )


def test_the_run_stops_claiming_calls_once_the_budget_is_spent(cast, fake, api_key):
    run, pairs = start(cast, make_llm_judge(fake), count=3, budget_usd=Decimal("0.000001"))
    calls = list(run.calls.order_by("pk"))
    assert judge_call_execute(call_id=calls[0].pk).status == "done"
    assert judge_call_execute(call_id=calls[1].pk).status == "budget"
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.BUDGET_REACHED
    progress = judge_run_progress(run=run)
    assert (progress.done, progress.pending) == (1, 5)
    assert progress.estimated_to_finish_usd == (progress.cost_usd * 5).quantize(Decimal("1e-6"))
    assert sum(fake.requests().values()) == 1
    with pytest.raises(ValidationError, match="raise the budget"):
        judge_run_resume(run=run, user=cast.researcher)
    judge_run_resume(run=run, user=cast.researcher, budget_usd=Decimal(10))
    assert judge_call_execute(call_id=calls[1].pk).status == "done"


def test_a_budget_that_could_never_stop_the_run_is_refused(cast, fake, api_key):
    make_marked_pairs(cast.study, 1)
    unpriced = make_llm_judge(fake, name="unpriced", price_in="0", price_out="0")
    with pytest.raises(ValidationError, match="no price per token"):
        judge_run_start(
            judge=unpriced, study=cast.study, user=cast.researcher, budget_usd=Decimal(1)
        )
    baseline = judge_create(name="coin", kind=Judge.Kind.RANDOM)
    with pytest.raises(ValidationError, match="makes no paid request"):
        judge_run_start(
            judge=baseline, study=cast.study, user=cast.researcher, budget_usd=Decimal(1)
        )
    assert not JudgeRun.objects.exists()
    # Without a budget both start; a resume with a budget is refused the same way.
    run = judge_run_start(judge=unpriced, study=cast.study, user=cast.researcher)
    judge_run_cancel(run=run, user=cast.researcher)
    with pytest.raises(ValidationError, match="no price per token"):
        judge_run_resume(run=run, user=cast.researcher, budget_usd=Decimal(1))
    assert judge_run_start(judge=baseline, study=cast.study, user=cast.researcher).pk


def test_a_cancelled_run_claims_nothing_until_resumed(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    judge_run_cancel(run=run, user=cast.researcher)
    call = call_of(run, pair)
    assert judge_call_execute(call_id=call.pk).status == "skipped"
    assert not fake.requests()
    with pytest.raises(PermissionDenied):
        judge_run_resume(run=run, user=cast.outsider)
    judge_run_resume(run=run, user=cast.researcher)
    assert judge_call_execute(call_id=call.pk).status == "done"


def test_the_reconciler_returns_calls_whose_lease_ran_out_and_counts_them_possibly_paid_twice(
    cast, fake, api_key
):
    broker_purge(settings.CELERY_BROKER_URL)
    run, (pair,) = start(cast, make_llm_judge(fake))
    stuck, waiting = call_of(run, pair, "ab"), call_of(run, pair, "ba")
    past = timezone.now() - timedelta(seconds=1)
    request = call_request(call=stuck)
    JudgeCall.objects.filter(pk=stuck.pk).update(
        status=JudgeCall.Status.RUNNING, attempts=1, lease_expires_at=past, request=request
    )
    JudgeCall.objects.filter(pk=waiting.pk).update(lease_expires_at=past)
    assert judge_calls_reconcile() == 2
    stuck.refresh_from_db()
    assert stuck.status == JudgeCall.Status.PENDING
    assert stuck.lease_expires_at > timezone.now()
    assert stuck.unrecorded_requests == 1 and "may have been paid twice" in stuck.error
    run.refresh_from_db()
    assert run.exposure_usd == call_cost_estimate(judge=run.judge, request=request) > 0
    progress = judge_run_progress(run=run)
    assert progress.possibly_charged_twice == 1
    assert progress.possibly_charged_twice_usd == run.exposure_usd.quantize(Decimal("1e-6"))
    broker_purge(settings.CELERY_BROKER_URL)
    assert judge_calls_reconcile() == 0


def judge_queue_in_worker_order(url: str) -> list[int]:
    """The call ids of the judge queue's messages, popped from Redis as a worker pops them (a
    batch message's calls in its order)."""
    ids: list[int] = []
    for _, args in judge_queue_messages(url):
        ids += args[0] if isinstance(args[0], list) else [args[0]]
    return ids


def test_a_call_taken_back_from_a_dead_worker_is_sent_ahead_of_the_backlog(cast, fake, api_key):
    broker_purge(settings.CELERY_BROKER_URL)
    run, pairs = start(cast, make_llm_judge(fake), count=15)
    stuck = call_of(run, pairs[0], "ab")
    # Its worker died holding it: running, the lease run out.
    JudgeCall.objects.filter(pk=stuck.pk).update(
        status=JudgeCall.Status.RUNNING,
        attempts=1,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
        request=call_request(call=stuck),
    )
    # The run's 29 other calls wait in the judge queue, queued by its fan-out.
    after: int | None = 0
    while after is not None:
        after = judge_run_fan_out(run_id=run.pk, after_call_id=after)
    backlog = list(run.calls.exclude(pk=stuck.pk).order_by("pk").values_list("pk", flat=True))
    assert len(backlog) == 29
    assert judge_calls_reconcile() == 1
    # A worker takes the taken-back call before any of the 29 (at the tail it came after all),
    # then the backlog in the order it was queued.
    assert judge_queue_in_worker_order(settings.CELERY_BROKER_URL) == [stuck.pk, *backlog]
    broker_purge(settings.CELERY_BROKER_URL)


def test_the_reconciler_sends_nothing_again_while_the_judge_queue_still_has_a_backlog(
    cast, fake, api_key
):
    broker_purge(settings.CELERY_BROKER_URL)
    run, (pair,) = start(cast, make_llm_judge(fake))
    JudgeCall.objects.filter(run=run).update(lease_expires_at=timezone.now() - timedelta(1))
    task_send("judges.call_execute", args=[0], queue=Queue.LLM_JUDGE)
    assert judge_calls_reconcile() == 0
    broker_purge(settings.CELERY_BROKER_URL)
    assert judge_calls_reconcile() == 2
    broker_purge(settings.CELERY_BROKER_URL)


def test_the_budget_counts_what_may_have_been_paid_twice(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake), budget_usd=Decimal("0.01"))
    JudgeRun.objects.filter(pk=run.pk).update(exposure_usd=Decimal("0.01"))
    assert judge_call_execute(call_id=call_of(run, pair).pk).status == "budget"
    assert not fake.requests()


def test_the_budget_check_reads_only_the_run_row_and_its_total_matches_the_calls(
    cast, fake, api_key, django_assert_num_queries
):
    run, pairs = start(cast, make_llm_judge(fake), count=3, budget_usd=Decimal(100))
    for call in run.calls.all():
        judge_call_execute(call_id=call.pk)
    run.refresh_from_db()
    # The running total is written with each call's cost, in the same transaction.
    assert run.spent_usd == run_cost(run_id=run.pk) > 0
    with django_assert_num_queries(0):
        assert not budget_reached(run=run)
    run.budget_usd = run.spent_usd
    assert budget_reached(run=run)


def test_progress_counts_calls_by_status(cast, fake, api_key):
    run, pairs = start(cast, make_llm_judge(fake), count=2)
    fake.replies[pair_key(pairs[0], "ba")] = "likert_prose_only"
    for call in run.calls.filter(pair=pairs[0]):
        judge_call_execute(call_id=call.pk)
    progress = judge_run_progress(run=run)
    assert (progress.total, progress.done, progress.pending, progress.parse_errors) == (4, 2, 2, 1)
    assert progress.percent == 50
    assert progress.estimated_to_finish_usd > 0


def test_a_reply_trickled_past_the_deadline_is_cut_off_at_the_deadline(
    cast, fake, api_key, settings
):
    # Each byte comes well within any per-read timeout; only a total deadline stops it.
    settings.CONCORD_JUDGE_TIMEOUT_SECONDS = 0.8
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.inject(Fault("trickle", seconds=5.0))
    call = call_of(run, pair)
    started = time.monotonic()
    outcome = judge_call_execute(call_id=call.pk)
    elapsed = time.monotonic() - started
    call.refresh_from_db()
    assert outcome.status == "pending" and "timeout" in call.error
    assert elapsed < 2.0
    wait = time.monotonic() + 5
    while not fake.snapshot() and time.monotonic() < wait:
        time.sleep(0.05)
    (record,) = fake.snapshot()
    assert record.aborted and record.at - record.started < 2.0


def test_a_content_filter_reply_is_a_refusal_with_the_providers_reason(cast, fake, api_key):
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.default_reply = "content_filter"
    call = call_of(run, pair)
    assert judge_call_execute(call_id=call.pk).status == "done"
    call.refresh_from_db()
    assert call.refusal and call.likert is None
    assert call.parse_error == (
        "refusal: the provider's content filter withheld the reply (finish_reason "
        "content_filter): violence (medium)"
    )


def test_a_rate_limiter_that_cannot_reach_redis_names_the_cause_on_the_run(
    cast, fake, api_key, settings
):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    run, (pair,) = start(cast, make_llm_judge(fake, rpm=60))
    outcome = judge_call_execute(call_id=call_of(run, pair).pk)
    assert outcome.status == "pending" and outcome.retry_in
    run.refresh_from_db()
    assert run.stall_reason.startswith(
        "rate limiter cannot reach Redis: Redis at redis://127.0.0.1:"
    )
    assert run.stall_since is not None
    assert not fake.requests()
    since = run.stall_since
    judge_call_execute(call_id=call_of(run, pair, "ba").pk)
    run.refresh_from_db()
    assert run.stall_since == since
    settings.REDIS_URL = os.environ["REDIS_URL"]
    assert judge_call_execute(call_id=call_of(run, pair, "ba").pk).status == "done"
    run.refresh_from_db()
    assert run.stall_reason == "" and run.stall_since is None


def test_a_slow_reply_past_the_timeout_is_transient(cast, fake, api_key, settings):
    settings.CONCORD_JUDGE_TIMEOUT_SECONDS = 0.3
    run, (pair,) = start(cast, make_llm_judge(fake))
    fake.inject(Fault("slow", seconds=1.0))
    call = call_of(run, pair)
    outcome = judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert outcome.status == "pending" and outcome.retry_in is not None
    assert "timeout" in call.error and "may have been paid" in call.error
    # The API may have generated (and billed) the reply the client stopped waiting for.
    run.refresh_from_db()
    assert call.unrecorded_requests == 1 and run.exposure_usd > 0


def test_a_server_that_refuses_connections_is_transient(cast, fake, api_key):
    judge = make_llm_judge(fake)
    fake.stop()
    run, (pair,) = start(cast, judge)
    call = call_of(run, pair)
    outcome = judge_call_execute(call_id=call.pk)
    call.refresh_from_db()
    assert outcome.status == "pending" and call.status == JudgeCall.Status.PENDING
    assert "connection error" in call.error
    # Nothing reached the API, so nothing may have been paid.
    assert call.unrecorded_requests == 0
