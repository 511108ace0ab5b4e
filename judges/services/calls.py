"""Executing one judge call: claim it, ask the judge outside any transaction, record the answer.

The call row in PostgreSQL is the durable state; the broker only carries its id. Every state
change is a conditional UPDATE that must change exactly one row, so a redelivered or duplicated
message finds the call claimed or done and does nothing.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import F, Sum
from django.utils import timezone

from judges.llm import baselines
from judges.llm.client import (
    ChatReply,
    JudgeCallError,
    JudgeNotConfigured,
    api_key_get,
    chat_complete,
)
from judges.llm.parsing import ParseResult, reply_parse, verdict_canonical
from judges.llm.prompts import conversation_render, question_render, template_render
from judges.models import Judge, JudgeCall, JudgeRun
from judges.ratelimit import RateLimitTimeout, rate_slot_acquire

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class CallOutcome:
    """What became of one attempt; `retry_in` is set when the task should try again later."""

    status: str
    retry_in: float | None = None
    detail: str = ""


def call_messages(*, call: JudgeCall) -> list[dict[str, str]]:
    """The chat messages for a call: the template filled with the pair in the call's order."""
    pair = call.pair
    prompt_turns = list(pair.prompt.turns or [])
    first, second = (
        (pair.answer_a, pair.answer_b) if call.order == "ab" else (pair.answer_b, pair.answer_a)
    )
    content = template_render(
        call.run.judge.prompt_template,
        question=question_render(prompt_turns, pair.turn),
        answer_first=conversation_render(prompt_turns, list(first.turns or []), pair.turn),
        answer_second=conversation_render(prompt_turns, list(second.turns or []), pair.turn),
        turn=pair.turn,
    )
    return [{"role": "user", "content": content}]


def call_request(*, call: JudgeCall) -> dict[str, Any]:
    """The request as it will be sent (without the key), stored on the call for inspection."""
    judge = call.run.judge
    return {
        "base_url": judge.base_url,
        "model": judge.model_name,
        "params": judge.params,
        "messages": call_messages(call=call),
        "template_hash": judge.template_hash,
    }


def tokens_estimate(*, judge: Judge, messages: list[dict[str, str]]) -> int:
    """A rough token count for the rate limiter: four characters a token, plus the reply cap."""
    chars = sum(len(message["content"]) for message in messages)
    return chars // 4 + int(judge.params.get("max_tokens", 512))


def cost_compute(*, judge: Judge, tokens_in: int, tokens_out: int) -> Decimal:
    """The price of a call in USD from its token counts and the judge's prices per million."""
    cost = (
        Decimal(tokens_in) * judge.price_input_per_mtok
        + Decimal(tokens_out) * judge.price_output_per_mtok
    ) / MILLION
    return cost.quantize(Decimal("0.00000001"))


def run_cost(*, run_id: int) -> Decimal:
    total = JudgeCall.objects.filter(run_id=run_id).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal(0)


def backoff_seconds(*, attempt: int, retry_after: float | None) -> float:
    """Exponential backoff with jitter, at least Retry-After, at most half the visibility timeout.

    A countdown longer than the broker's visibility timeout would make Redis hand the message to
    a second worker while the first still holds it.
    """
    base = settings.CONCORD_JUDGE_BACKOFF_BASE_SECONDS * (2 ** max(0, attempt - 1))
    delay = random.uniform(base / 2, base)
    if retry_after is not None:
        delay = max(delay, retry_after + random.uniform(0, 0.25 * base))
    options: dict[str, Any] = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    visibility = float(options.get("visibility_timeout", 3600))
    return min(delay, visibility / 2)


def run_finish_if_complete(*, run_id: int) -> bool:
    """Mark a running run done once none of its calls is pending or running."""
    open_calls = JudgeCall.objects.filter(
        run_id=run_id, status__in=[JudgeCall.Status.PENDING, JudgeCall.Status.RUNNING]
    )
    if open_calls.exists():
        return False
    return (
        JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.RUNNING).update(
            status=JudgeRun.Status.DONE, finished_at=timezone.now()
        )
        == 1
    )


def _budget_reached(run: JudgeRun) -> bool:
    if run.budget_usd is None:
        return False
    return run_cost(run_id=run.pk) >= run.budget_usd


def _claim(call: JudgeCall, request: dict[str, Any]) -> int | None:
    """Claim a pending call of a running run; return the attempt number, or None if taken."""
    lease = timezone.now() + timedelta(seconds=settings.CONCORD_JUDGE_LEASE_SECONDS)
    claimed = JudgeCall.objects.filter(
        pk=call.pk,
        status=JudgeCall.Status.PENDING,
        run__status=JudgeRun.Status.RUNNING,
    ).update(
        status=JudgeCall.Status.RUNNING,
        attempts=F("attempts") + 1,
        lease_expires_at=lease,
        request=request,
    )
    if claimed != 1:
        return None
    return JudgeCall.objects.values_list("attempts", flat=True).get(pk=call.pk)


def _mine(call: JudgeCall, attempt: int) -> Any:
    """The call's row, only while this attempt still holds it."""
    return JudgeCall.objects.filter(pk=call.pk, status=JudgeCall.Status.RUNNING, attempts=attempt)


def _record_reply(
    call: JudgeCall, attempt: int, reply: ChatReply, cost: Decimal, output_format: str
) -> bool:
    parsed: ParseResult = reply_parse(reply.content, output_format)
    fields: dict[str, Any] = {
        "status": JudgeCall.Status.DONE,
        "raw_output": reply.content,
        "tokens_in": reply.tokens_in,
        "tokens_out": reply.tokens_out,
        "cost_usd": cost,
        "latency_ms": reply.latency_ms,
        "model_version_reported": reply.model_reported[:200],
        "refusal": reply.refusal or parsed.refusal,
        "parse_error": parsed.parse_error,
        "error": "",
        "lease_expires_at": None,
        "finished_at": timezone.now(),
    }
    if reply.refusal and not parsed.parse_error:
        fields["parse_error"] = "refusal: the API reported a content refusal"
    if parsed.ok and not reply.refusal:
        verdict = verdict_canonical(parsed, call.order)  # type: ignore[arg-type]
        fields.update(
            likert_shown=verdict.likert_shown,
            likert=verdict.likert,
            preference=verdict.preference,
            score_a=verdict.score_a,
            score_b=verdict.score_b,
            verdict_label=verdict.verdict_label,
            values=list(verdict.values),
        )
    return bool(_mine(call, attempt).update(**fields) == 1)


def _baseline_reply(call: JudgeCall) -> ChatReply:
    judge = call.run.judge
    if judge.kind == Judge.Kind.RANDOM:
        content = baselines.random_reply(seed=call.run.seed, pair_id=call.pair_id, order=call.order)
    else:
        pair = call.pair
        first, second = (
            (pair.answer_a, pair.answer_b) if call.order == "ab" else (pair.answer_b, pair.answer_a)
        )
        content = baselines.longer_reply(first=first.text, second=second.text)
    return ChatReply(content=content, tokens_in=0, tokens_out=0, model_reported="", latency_ms=0)


def judge_call_execute(*, call_id: int) -> CallOutcome:
    """Make one call if it is still pending and its run is running; at most once per attempt.

    Holds no lock and opens no transaction: each step is one conditional UPDATE, and the API is
    called between them, outside any transaction.
    """
    call = (
        JudgeCall.objects.select_related(
            "run__judge", "pair__prompt", "pair__answer_a", "pair__answer_b"
        )
        .filter(pk=call_id)
        .first()
    )
    if call is None:
        return CallOutcome("missing")
    if call.status != JudgeCall.Status.PENDING:
        return CallOutcome("skipped", detail=f"call is {call.status}")
    run, judge = call.run, call.run.judge
    if run.status != JudgeRun.Status.RUNNING:
        return CallOutcome("skipped", detail=f"run is {run.status}")
    if _budget_reached(run):
        JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.RUNNING).update(
            status=JudgeRun.Status.BUDGET_REACHED, finished_at=timezone.now()
        )
        return CallOutcome("budget")

    if judge.kind != Judge.Kind.LLM:
        attempt = _claim(call, {"baseline": judge.kind, "seed": run.seed})
        if attempt is None:
            return CallOutcome("skipped", detail="claimed elsewhere")
        _record_reply(call, attempt, _baseline_reply(call), Decimal(0), "likert")
        run_finish_if_complete(run_id=run.pk)
        return CallOutcome("done")

    request = call_request(call=call)
    try:
        api_key = api_key_get(judge.api_key_env)
    except JudgeNotConfigured as exc:
        return _fail_unclaimed(call, request, str(exc))
    # Take a rate-limit slot before the claim: a worker that waits never holds a lease, so the
    # reconciler cannot hand its call to another worker while it sleeps.
    try:
        rate_slot_acquire(
            key=f"judge:{judge.pk}",
            requests_per_window=judge.requests_per_minute,
            tokens_per_window=judge.tokens_per_minute,
            tokens=tokens_estimate(judge=judge, messages=request["messages"]),
            max_wait=settings.CONCORD_JUDGE_LEASE_SECONDS,
        )
    except RateLimitTimeout as exc:
        return CallOutcome("pending", retry_in=exc.waited, detail=str(exc))
    attempt = _claim(call, request)
    if attempt is None:
        return CallOutcome("skipped", detail="claimed elsewhere")
    try:
        reply = chat_complete(
            base_url=judge.base_url,
            api_key=api_key,
            model=judge.model_name,
            messages=request["messages"],
            params=judge.params,
            idempotency_key=f"concord-call-{call.pk}",
            timeout=settings.CONCORD_JUDGE_TIMEOUT_SECONDS,
        )
    except JudgeCallError as exc:
        return _record_error(call, attempt, exc)
    cost = cost_compute(judge=judge, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)
    if not _record_reply(call, attempt, reply, cost, judge.output_format):
        logger.warning("call %s: attempt %s lost its claim before recording", call.pk, attempt)
        return CallOutcome("lost")
    run_finish_if_complete(run_id=run.pk)
    return CallOutcome("done")


def _fail_unclaimed(call: JudgeCall, request: dict[str, Any], message: str) -> CallOutcome:
    JudgeCall.objects.filter(pk=call.pk, status=JudgeCall.Status.PENDING).update(
        status=JudgeCall.Status.FAILED, error=message, request=request, finished_at=timezone.now()
    )
    run_finish_if_complete(run_id=call.run_id)
    return CallOutcome("failed", detail=message)


def _record_error(call: JudgeCall, attempt: int, exc: JudgeCallError) -> CallOutcome:
    """Put a transient failure back to pending with a retry time, or record a permanent one."""
    message = f"attempt {attempt}: {exc}"
    if exc.transient and attempt < settings.CONCORD_JUDGE_MAX_ATTEMPTS:
        delay = backoff_seconds(attempt=attempt, retry_after=exc.retry_after)
        # The reconciler leaves the call alone until its retry is due and a grace period passed.
        due = timezone.now() + timedelta(
            seconds=delay + settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS
        )
        _mine(call, attempt).update(
            status=JudgeCall.Status.PENDING, error=message, lease_expires_at=due
        )
        return CallOutcome("pending", retry_in=delay, detail=message)
    if exc.transient:
        message += f" (gave up after {attempt} attempts)"
    _mine(call, attempt).update(
        status=JudgeCall.Status.FAILED,
        error=message,
        lease_expires_at=None,
        finished_at=timezone.now(),
    )
    run_finish_if_complete(run_id=call.run_id)
    return CallOutcome("failed", detail=message)
