"""Executing one judge call: claim it, ask the judge outside any transaction, record the answer.

The call row in PostgreSQL is the durable state; the broker only carries its id. Every state
change is a conditional UPDATE that must change exactly one row, so a redelivered or duplicated
message finds the call claimed or done and does nothing. The claim's conditions are all on the
updated row itself (PostgreSQL re-checks them on the row a concurrent claim just committed, so two
workers can never both win), and each claim leaves a fresh token on the row: a worker writes to
the call only while its token is there, and after a dropped connection it can tell whether its
last write went through.

A reply that has been paid for is not thrown away with a dropped database connection: the write
is retried on a new connection until the call's lease runs out. If it never lands, the call stays
"running" until the reconciler takes it back and counts the request as possibly paid twice.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Exists, F, Func, JSONField, OuterRef, Q, Sum, TextField, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Cast, Greatest
from django.utils import timezone

from annotation.models import Study
from core.broker import BrokerUnavailable, task_send, url_label
from core.queues import Queue
from judges.llm import baselines
from judges.llm.client import (
    ChatReply,
    JudgeCallError,
    JudgeNotConfigured,
    UnsafeBaseURL,
    chat_client,
    chat_complete,
)
from judges.llm.parsing import ParseResult, reply_parse, verdict_canonical
from judges.llm.prompts import (
    conversation_block,
    conversation_render,
    question_render,
    template_render,
)
from judges.models import Judge, JudgeCall, JudgeRun
from judges.ratelimit import RateLimitTimeout, rate_slot_acquire
from judges.services.grading import (
    call_template,
    grade_content,
    grade_pairs_derive,
    is_grading,
    reference_hash,
)
from judges.services.journal import (
    call_identity,
    reply_journal_forget,
    reply_journal_read,
    reply_journal_write,
)
from judges.services.keys import judge_api_key

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
RATE_LIMITER_STALL = "rate limiter cannot reach Redis"
T = TypeVar("T")
# Errors of a dropped or refused database connection: the statement may or may not have run.
DB_CONNECTION_ERRORS = (OperationalError, InterfaceError)


@dataclass(frozen=True)
class CallOutcome:
    """What became of one attempt; `retry_in` is set when the task should try again later."""

    status: str
    retry_in: float | None = None
    detail: str = ""


def call_content(*, call: JudgeCall) -> tuple[str, str | None]:
    """The filled template of a call, and the reference answer it shows (None: none).

    A pair call shows the pair in the call's order, up to the call's turn; a grade call
    (judges.services.grading) shows its one answer. Prompts in the study's reference categories
    use the judge's reference template, when it has one; a call at turn 2 or later uses the
    judge's multi-turn template, when it has one, with the whole conversation in
    {conversation} (judges.services.turns).
    """
    judge, study = call.run.judge, call.run.study
    if call.answer_id is not None:
        answer = call.answer
        assert answer is not None and call.turn is not None
        return grade_content(
            judge=judge,
            study=study,
            prompt=answer.prompt,
            answer_turns=list(answer.turns or []),
            turn=call.turn,
        )
    pair = call.pair
    assert pair is not None
    prompt_turns = list(pair.prompt.turns or [])
    turn = call.turn or pair.turn
    first, second = (
        (pair.answer_a, pair.answer_b) if call.order == "ab" else (pair.answer_b, pair.answer_a)
    )
    first_turns, second_turns = list(first.turns or []), list(second.turns or [])
    text, reference = call_template(judge=judge, study=study, prompt=pair.prompt, turn=turn)
    content = template_render(
        text,
        question=question_render(prompt_turns, turn),
        answer_first=conversation_render(prompt_turns, first_turns, turn),
        answer_second=conversation_render(prompt_turns, second_turns, turn),
        turn=turn,
        reference=reference or "",
        conversation=conversation_block(
            prompt_turns,
            [("First assistant", first_turns), ("Second assistant", second_turns)],
            turn,
        ),
    )
    return content, reference


def call_messages(*, call: JudgeCall) -> list[dict[str, str]]:
    """The chat messages for a call: the template filled with the pair in the call's order, or
    with a grade call's one answer."""
    content, _ = call_content(call=call)
    return [{"role": "user", "content": content}]


def call_request(*, call: JudgeCall) -> dict[str, Any]:
    """The request as it will be sent (without the key), stored on the call for inspection.

    A call that shows a reference answer says where it came from and its hash (a later run's
    grade is copied only while that hash is the same).
    """
    judge = call.run.judge
    content, reference = call_content(call=call)
    request: dict[str, Any] = {
        "base_url": judge.base_url,
        "model": judge.model_name,
        "params": judge.params,
        "messages": [{"role": "user", "content": content}],
        "template_hash": judge.template_hash,
        "turn": call.turn,
    }
    if call.answer_id is not None:
        request |= {"answer_id": call.answer_id, "reference_hash": None}
    if reference is not None:
        prompt = call.answer.prompt if call.answer is not None else call.pair.prompt  # type: ignore[union-attr]
        request |= {
            "reference_source": prompt.reference_source,
            "reference_hash": reference_hash(reference),
        }
    return request


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
    """The recorded cost of a run, summed from its call rows."""
    total = JudgeCall.objects.filter(run_id=run_id).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal(0)


def call_cost_estimate(*, judge: Judge, request: dict[str, Any]) -> Decimal:
    """An upper estimate of one request's price: its prompt, plus the reply cap in full."""
    messages = request.get("messages") or []
    if not messages:
        return Decimal(0)
    max_tokens = int(judge.params.get("max_tokens", 512))
    prompt_tokens = tokens_estimate(judge=judge, messages=messages) - max_tokens
    return cost_compute(judge=judge, tokens_in=prompt_tokens, tokens_out=max_tokens)


def _reconnect() -> None:
    """Drop this thread's database connection; Django opens a new one at the next query."""
    try:
        connection.close()
    except DB_CONNECTION_ERRORS:
        logger.debug("closing a broken database connection failed", exc_info=True)


def db_retry(
    step: Callable[[], T], *, until: float, settled: Callable[[], T | None] | None = None
) -> T:
    """Run one database step, reconnecting and running it again while the connection drops.

    `until` is a time.monotonic() deadline after which the error is raised. After a failure,
    `settled` (when given) is asked first whether the failed attempt went through after all; a
    value other than None is returned as the step's result.
    """
    delay = 0.05
    failed = False
    while True:
        try:
            if failed and settled is not None:
                result = settled()
                if result is not None:
                    return result
            return step()
        except DB_CONNECTION_ERRORS as exc:
            failed = True
            if time.monotonic() + delay > until:
                raise
            logger.warning("database connection lost (%s); reconnecting", str(exc).strip())
            _reconnect()
            time.sleep(delay)
            delay = min(1.0, delay * 2)


def attempt_errors_appended(*, message: str, attempt: int | Combinable | None = None) -> Func:
    """An UPDATE expression that appends one entry to a call's `attempt_errors` history.

    `attempt` is the attempt's number, or an expression of the row (the reconciler's
    `F("attempts")`); by default the row's attempt count. One statement, so concurrent entries
    never overwrite each other.
    """
    number = F("attempts") if attempt is None else attempt
    entry = Func(
        Cast(Value("attempt"), TextField()),
        number if isinstance(number, Combinable) else Value(number),
        Cast(Value("at"), TextField()),
        Cast(Value(timezone.now().isoformat(timespec="seconds")), TextField()),
        Cast(Value("error"), TextField()),
        Cast(Value(message), TextField()),
        function="jsonb_build_object",
        output_field=JSONField(),
    )
    return Func(
        F("attempt_errors"),
        Func(entry, function="jsonb_build_array", output_field=JSONField()),
        template="(%(expressions)s)",
        arg_joiner=" || ",
        output_field=JSONField(),
    )


def run_stall_note(*, run_id: int, reason: str) -> None:
    """Say on the run why its calls cannot progress; the time is kept while the reason stays.

    `reason` reads "<what>: <details>"; the run page shows "<what> since <time>: <details>".
    """
    JudgeRun.objects.filter(pk=run_id).exclude(stall_reason=reason).update(
        stall_reason=reason, stall_since=timezone.now()
    )


def run_stall_clear(*, run_id: int, prefix: str = "") -> None:
    """Forget the run's stall reason (only one starting with `prefix`, when given)."""
    JudgeRun.objects.filter(pk=run_id, stall_reason__startswith=prefix).exclude(
        stall_reason=""
    ).update(stall_reason="", stall_since=None)


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
    """Mark a running run done once none of its calls is pending or running (two index reads).

    A single-answer grading run's pair verdicts are derived from its grades in the same
    transaction as its done status (judges.services.grading.grade_pairs_derive).
    """
    open_calls = JudgeCall.objects.filter(
        run_id=run_id, status__in=[JudgeCall.Status.PENDING, JudgeCall.Status.RUNNING]
    )
    if open_calls.exists():
        return False
    with transaction.atomic():
        # A panel run has no open calls until its combination writes them all, done.
        finished = (
            JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.RUNNING)
            .exclude(judge__kind=Judge.Kind.PANEL)
            .update(status=JudgeRun.Status.DONE, finished_at=timezone.now())
            == 1
        )
        if finished:
            judge = Judge.objects.filter(runs=run_id).only("kind", "output_format").first()
            if judge is not None and is_grading(judge):
                grade_pairs_derive(run_id=run_id)
            study_id = (
                JudgeRun.objects.filter(pk=run_id, study__selection=Study.Selection.ACTIVE)
                .values_list("study_id", flat=True)
                .first()
            )
            if study_id is not None:
                transaction.on_commit(lambda: _priorities_request(study_id))
    return finished


def _priorities_request(study_id: int) -> None:
    """Ask the analysis worker to recompute an active study's pair priorities: the new verdicts
    change its judge-disagreement term. Sent by task name (the judges app does not import the
    analysis app); a broker that refuses it is logged, and beat's refresh catches up."""
    try:
        task_send(
            "leaderboard.pair_priorities_recompute",
            args=[study_id],
            queue=Queue.ANALYSIS,
            recovery="beat's pair-priority refresh recomputes them within 5 minutes",
        )
    except BrokerUnavailable:
        logger.warning("pair priorities of study %s not requested", study_id, exc_info=True)


def budget_reached(*, run: JudgeRun) -> bool:
    """Whether the run's recorded spend plus its possibly-double-paid exposure reached its cap.

    One row read, whatever the size of the run: the totals live on the run's row.
    """
    if run.budget_usd is None:
        return False
    return run.spent_usd + run.exposure_usd >= run.budget_usd


def call_claim(*, call_id: int, attempts: int, request: dict[str, Any], token: str) -> bool:
    """Claim a pending call of a running run whose retry time has come; True if this one won.

    Every condition is on the call's own row (status, attempts seen, not-before time); the run's
    status is an EXISTS on the run's row, so the UPDATE is not rewritten as `id IN (SELECT ...)`,
    whose re-check after a concurrent claim would look at the id alone and let both through.
    """
    now = timezone.now()
    lease = now + timedelta(seconds=settings.CONCORD_JUDGE_LEASE_SECONDS)
    claimed = JudgeCall.objects.filter(
        Q(not_before__isnull=True) | Q(not_before__lte=now),
        Exists(JudgeRun.objects.filter(pk=OuterRef("run_id"), status=JudgeRun.Status.RUNNING)),
        pk=call_id,
        status=JudgeCall.Status.PENDING,
        attempts=attempts,
    ).update(
        status=JudgeCall.Status.RUNNING,
        attempts=attempts + 1,
        lease_expires_at=lease,
        lease_token=token,
        not_before=None,
        request=request,
    )
    return claimed == 1


def _claim(call: JudgeCall, request: dict[str, Any], token: str, until: float) -> int | None:
    """Claim the call (retrying over a dropped connection); the attempt number, or None."""
    won = db_retry(
        lambda: call_claim(call_id=call.pk, attempts=call.attempts, request=request, token=token),
        until=until,
        settled=lambda: (
            True if JudgeCall.objects.filter(pk=call.pk, lease_token=token).exists() else None
        ),
    )
    return call.attempts + 1 if won else None


def _mine(call: JudgeCall, token: str) -> Any:
    """The call's row, only while this attempt still holds it."""
    return JudgeCall.objects.filter(pk=call.pk, status=JudgeCall.Status.RUNNING, lease_token=token)


def _exposure_add(call: JudgeCall, token: str) -> None:
    """Count one request of this attempt as possibly paid without its reply being recorded."""
    estimate = call_cost_estimate(judge=call.run.judge, request=call_request(call=call))
    with transaction.atomic():
        if _mine(call, token).update(unrecorded_requests=F("unrecorded_requests") + 1) == 1:
            JudgeRun.objects.filter(pk=call.run_id).update(
                exposure_usd=F("exposure_usd") + estimate
            )


def _refusal_parse_error(reply: ChatReply) -> str:
    reason = reply.refusal_reason or "the API reported a content refusal"
    return f"refusal: {reason}"


def _record_reply(
    call: JudgeCall,
    token: str,
    reply: ChatReply,
    cost: Decimal,
    output_format: str,
    until: float,
    recovered: bool = False,
) -> bool:
    """Write the reply and add its cost to the run's spend in one transaction; True if written.

    Retried over dropped connections until `until`, and checked by the call's token, so a write
    that landed just before its connection died is not taken for a lost one. A `recovered`
    reply comes from the journal (an earlier attempt received it, and the reconciler counted
    that attempt on the ledger when it took the call back): the ledger's count goes down by one
    in the same transaction, since that request was paid once, not twice.
    """
    parsed: ParseResult = reply_parse(reply.content, output_format)
    estimate = (
        call_cost_estimate(judge=call.run.judge, request=call_request(call=call))
        if recovered
        else Decimal(0)
    )
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
        "not_before": None,
        "finished_at": timezone.now(),
    }
    if reply.refusal:
        fields["parse_error"] = _refusal_parse_error(reply)
    if parsed.ok and not reply.refusal and call.answer_id is not None:
        fields["grade"] = parsed.grade
    elif parsed.ok and not reply.refusal:
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

    def write() -> bool:
        with transaction.atomic():
            if _mine(call, token).update(**fields) != 1:
                return False
            if cost:
                JudgeRun.objects.filter(pk=call.run_id).update(spent_usd=F("spent_usd") + cost)
            if recovered and _ledger_undo_one(call):
                JudgeRun.objects.filter(pk=call.run_id).update(
                    exposure_usd=Greatest(F("exposure_usd") - estimate, Value(Decimal(0)))
                )
        return True

    def landed() -> bool | None:
        done = JudgeCall.objects.filter(
            pk=call.pk, lease_token=token, status=JudgeCall.Status.DONE
        ).exists()
        return True if done else None

    written = db_retry(write, until=until, settled=landed)
    if written:
        db_retry(lambda: run_stall_clear(run_id=call.run_id), until=until)
    return written


def _ledger_undo_one(call: JudgeCall) -> bool:
    """Take one request off the call's ledger count, if it has any; True if it had."""
    return (
        JudgeCall.objects.filter(pk=call.pk, unrecorded_requests__gt=0).update(
            unrecorded_requests=F("unrecorded_requests") - 1
        )
        == 1
    )


def _baseline_reply(call: JudgeCall) -> ChatReply:
    judge = call.run.judge
    assert call.pair_id is not None, "a baseline judges pairs"
    if judge.kind == Judge.Kind.RANDOM:
        content = baselines.random_reply(seed=call.run.seed, pair_id=call.pair_id, order=call.order)
    else:
        pair = call.pair
        assert pair is not None
        first, second = (
            (pair.answer_a, pair.answer_b) if call.order == "ab" else (pair.answer_b, pair.answer_a)
        )
        content = baselines.longer_reply(first=first.text, second=second.text)
    return ChatReply(content=content, tokens_in=0, tokens_out=0, model_reported="", latency_ms=0)


def _call_load(call_id: int) -> JudgeCall | None:
    return (
        JudgeCall.objects.select_related(
            "run__judge",
            "run__study",
            "pair__prompt",
            "pair__answer_a",
            "pair__answer_b",
            "answer__prompt",
        )
        .filter(pk=call_id)
        .first()
    )


def _due_in(call: JudgeCall, seconds: float) -> None:
    """Tell the reconciler that this pending call's message comes back in `seconds` (a retry)."""
    grace = settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS
    JudgeCall.objects.filter(pk=call.pk, status=JudgeCall.Status.PENDING).update(
        lease_expires_at=timezone.now() + timedelta(seconds=seconds + grace)
    )


def _not_due(call: JudgeCall, now: datetime) -> CallOutcome | None:
    """An outcome for a message that came before the call's retry time, or None if it is due.

    The message that owns the retry was scheduled for that time, so one that comes a little
    early waits for it; one that comes much earlier is a duplicate and is dropped (the owner,
    or the reconciler, brings the call back).
    """
    if call.not_before is None or call.not_before <= now:
        return None
    early = (call.not_before - now).total_seconds()
    if early <= settings.CONCORD_JUDGE_EARLY_TOLERANCE_SECONDS:
        return CallOutcome("pending", retry_in=early, detail="retry time not reached")
    return CallOutcome("skipped", detail=f"retry not due for {early:.1f} s")


def judge_call_execute(*, call_id: int) -> CallOutcome:  # noqa: C901 - the call's steps in order (docstring)
    """Make one call if it is still pending, due and its run is running; at most once per attempt.

    Holds no lock: each step is one conditional UPDATE (the reply's write and the run's spend
    share one short transaction), and the API is called between them, outside any transaction.
    The request has a total deadline (CONCORD_JUDGE_TIMEOUT_SECONDS) below the lease.
    """
    started = time.monotonic()
    call = db_retry(
        lambda: _call_load(call_id),
        until=started + settings.CONCORD_JUDGE_LEASE_SECONDS / 2,
    )
    if call is None:
        return CallOutcome("missing")
    if call.status != JudgeCall.Status.PENDING:
        return CallOutcome("skipped", detail=f"call is {call.status}")
    run, judge = call.run, call.run.judge
    if run.status != JudgeRun.Status.RUNNING:
        return CallOutcome("skipped", detail=f"run is {run.status}")
    early = _not_due(call, timezone.now())
    if early is not None:
        return early
    if budget_reached(run=run):
        JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.RUNNING).update(
            status=JudgeRun.Status.BUDGET_REACHED, finished_at=timezone.now()
        )
        return CallOutcome("budget")

    token = uuid.uuid4().hex
    if judge.kind != Judge.Kind.LLM:
        until = time.monotonic() + settings.CONCORD_JUDGE_LEASE_SECONDS / 2
        attempt = _claim(call, {"baseline": judge.kind, "seed": run.seed}, token, until)
        if attempt is None:
            return CallOutcome("skipped", detail="claimed elsewhere")
        _record_reply(call, token, _baseline_reply(call), Decimal(0), "likert", until)
        db_retry(lambda: run_finish_if_complete(run_id=run.pk), until=until)
        return CallOutcome("done")

    request = call_request(call=call)
    try:
        api_key = judge_api_key(judge=judge)
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
        _due_in(call, exc.waited)
        return CallOutcome("pending", retry_in=exc.waited, detail=str(exc))
    except redis.RedisError as exc:
        reason = (
            f"{RATE_LIMITER_STALL}: Redis at {url_label(settings.REDIS_URL)} does not answer "
            f"({exc}); the calls wait until it does (check REDIS_URL)"
        )
        run_stall_note(run_id=run.pk, reason=reason)
        delay = backoff_seconds(attempt=3, retry_after=None)
        _due_in(call, delay)
        return CallOutcome("pending", retry_in=delay, detail=reason)
    try:
        # Built before the claim, so that the request leaves as soon as the call is claimed:
        # a worker killed in between is counted as possibly paid though nothing was sent.
        prepared = chat_client(
            base_url=judge.base_url,
            api_key=api_key,
            timeout=settings.CONCORD_JUDGE_TIMEOUT_SECONDS,
        )
    except UnsafeBaseURL as exc:
        return _fail_unclaimed(call, request, str(exc))
    claimed_at = time.monotonic()
    # Every write after the claim must land before the lease runs out and the reconciler hands
    # the call to another worker; the request's own deadline is shorter still.
    until = (
        claimed_at
        + settings.CONCORD_JUDGE_LEASE_SECONDS
        - settings.CONCORD_JUDGE_TIMEOUT_SECONDS / 4
    )
    attempt = _claim(call, request, token, until)
    if attempt is None:
        return CallOutcome("skipped", detail="claimed elsewhere")
    idempotency_key = call_idempotency_key(call_id=call.pk)
    # An earlier attempt's reply that never reached the database is recorded, not paid again.
    identity = call_identity(
        run_id=call.run_id,
        pair_id=call.pair_id if call.pair_id is not None else f"answer{call.answer_id}@{call.turn}",
        order=call.order,
        created_at=call.created_at,
    )
    journaled = reply_journal_read(idempotency_key=idempotency_key, identity=identity)
    if journaled is not None:
        logger.warning(
            "call %s: attempt %s records the reply attempt %s received at %s (journal)",
            call.pk,
            attempt,
            journaled.attempt,
            journaled.received_at,
        )
        reply = journaled.reply
    else:
        try:
            reply = chat_complete(
                base_url=judge.base_url,
                api_key=api_key,
                model=judge.model_name,
                messages=request["messages"],
                params=judge.params,
                idempotency_key=idempotency_key,
                timeout=settings.CONCORD_JUDGE_TIMEOUT_SECONDS,
                prepared=prepared,
            )
        except JudgeCallError as exc:
            return _record_error(call, token, attempt, exc, until)
        reply_journal_write(
            idempotency_key=idempotency_key, identity=identity, attempt=attempt, reply=reply
        )
    cost = cost_compute(judge=judge, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)
    recorded = _record_reply(
        call, token, reply, cost, judge.output_format, until, recovered=journaled is not None
    )
    if not recorded:
        # The reconciler took the call back after the lease and counted this request as
        # possibly paid twice; the reply is not written over a new attempt, and stays in the
        # journal for the call's next claim.
        logger.warning("call %s: attempt %s lost its claim before recording", call.pk, attempt)
        return CallOutcome("lost")
    reply_journal_forget(idempotency_key=idempotency_key)
    db_retry(lambda: run_finish_if_complete(run_id=run.pk), until=until)
    return CallOutcome("done")


def call_idempotency_key(*, call_id: int) -> str:
    """The Idempotency-Key of every request of a call, and its key in the journal."""
    return f"concord-call-{call_id}"


def _fail_unclaimed(call: JudgeCall, request: dict[str, Any], message: str) -> CallOutcome:
    JudgeCall.objects.filter(pk=call.pk, status=JudgeCall.Status.PENDING).update(
        status=JudgeCall.Status.FAILED,
        error=message,
        attempt_errors=attempt_errors_appended(message=message),
        request=request,
        finished_at=timezone.now(),
    )
    run_finish_if_complete(run_id=call.run_id)
    return CallOutcome("failed", detail=message)


def _record_error(
    call: JudgeCall, token: str, attempt: int, exc: JudgeCallError, until: float
) -> CallOutcome:
    """Put a transient failure back to pending, not before its retry time, or record it failed.

    A request that may have been paid without a reply (a timeout after sending) is counted on
    the call and its estimated price on the run, as the reconciler does for a dead worker's.
    """
    message = f"attempt {attempt}: {exc}"
    if exc.maybe_paid:
        message += " (the request may have been paid)"
        db_retry(lambda: _exposure_add(call, token), until=until)
    if exc.transient and attempt < settings.CONCORD_JUDGE_MAX_ATTEMPTS:
        delay = backoff_seconds(attempt=attempt, retry_after=exc.retry_after)
        not_before = timezone.now() + timedelta(seconds=delay)
        # The reconciler leaves the call alone until its retry is due and a grace period passed.
        due = not_before + timedelta(seconds=settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS)
        db_retry(
            lambda: _mine(call, token).update(
                status=JudgeCall.Status.PENDING,
                error=message,
                attempt_errors=attempt_errors_appended(message=message, attempt=attempt),
                not_before=not_before,
                lease_expires_at=due,
            ),
            until=until,
        )
        return CallOutcome("pending", retry_in=delay, detail=message)
    if exc.transient:
        message += f" (gave up after {attempt} attempts)"
    db_retry(
        lambda: _mine(call, token).update(
            status=JudgeCall.Status.FAILED,
            error=message,
            attempt_errors=attempt_errors_appended(message=message, attempt=attempt),
            lease_expires_at=None,
            finished_at=timezone.now(),
        ),
        until=until,
    )
    db_retry(lambda: run_finish_if_complete(run_id=call.run_id), until=until)
    return CallOutcome("failed", detail=message)
