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

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Func, JSONField, Sum, TextField, Value
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
    base_url_check,
    chat_client_kept,
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
from judges.ratelimit import RateLimitTimeout, rate_slot_acquire, rate_slot_try
from judges.services.grading import (
    call_template,
    grade_content,
    grade_pairs_derive,
    is_grading,
    reference_hash,
)
from judges.services.journal import (
    call_identity,
    reply_journal_forget_many,
    reply_journal_read_many,
    reply_journal_write,
)
from judges.services.keys import judge_api_key

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
RATE_LIMITER_STALL = "rate limiter cannot reach Redis"
T = TypeVar("T")
# Errors of a dropped or refused database connection: the statement may or may not have run.
DB_CONNECTION_ERRORS = (OperationalError, InterfaceError)
CALLS = JudgeCall._meta.db_table
RUNS = JudgeRun._meta.db_table


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
    """Claim a pending call of a running run whose retry time has come; True if this one won."""
    return calls_claim(claims=[(call_id, attempts, request)], token=token) == {call_id}


def calls_claim(*, claims: list[tuple[int, int, dict[str, Any]]], token: str) -> set[int]:
    """Claim pending calls of running runs whose retry time has come, in one UPDATE; the ids won.

    `claims` holds (call id, attempts seen, request to store). Every condition is on each call's
    own row (status, attempts seen, not-before time), joined to the batch's VALUES row, which
    PostgreSQL re-checks on the row a concurrent claim just committed, so two workers never both
    win a call; the run's status is an EXISTS on the run's row, so the UPDATE is not rewritten as
    `id IN (SELECT ...)`, whose re-check would look at the id alone. The rows are listed in id
    order, so two overlapping batches lock them in the same order.
    """
    if not claims:
        return set()
    now = timezone.now()
    lease = now + timedelta(seconds=settings.CONCORD_JUDGE_LEASE_SECONDS)
    rows = sorted(claims, key=lambda claim: claim[0])
    values = ", ".join(["(%s::bigint, %s::integer, %s::jsonb)"] * len(rows))
    sql = (
        f'UPDATE "{CALLS}" SET "status" = %s, "attempts" = v.attempts + 1, '
        '"lease_expires_at" = %s, "lease_token" = %s, "not_before" = NULL, "request" = v.request '
        f"FROM (VALUES {values}) AS v (id, attempts, request) "
        f'WHERE "{CALLS}"."id" = v.id AND "{CALLS}"."status" = %s '
        f'AND "{CALLS}"."attempts" = v.attempts '
        f'AND ("{CALLS}"."not_before" IS NULL OR "{CALLS}"."not_before" <= %s) '
        f'AND EXISTS (SELECT 1 FROM "{RUNS}" U0 WHERE U0."id" = "{CALLS}"."run_id" '
        'AND U0."status" = %s) '
        f'RETURNING "{CALLS}"."id"'
    )
    params: list[Any] = [JudgeCall.Status.RUNNING, lease, token]
    for call_id, attempts, request in rows:
        params += [call_id, attempts, json.dumps(request)]
    params += [JudgeCall.Status.PENDING, now, JudgeRun.Status.RUNNING]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def _claim_many(
    calls: list[JudgeCall], requests: dict[int, dict[str, Any]], token: str, until: float
) -> set[int]:
    """Claim the calls (retrying over a dropped connection); the ids this attempt won."""
    ids = [call.pk for call in calls]

    def settled() -> set[int] | None:
        won = set(
            JudgeCall.objects.filter(pk__in=ids, lease_token=token).values_list("pk", flat=True)
        )
        return won or None

    return db_retry(
        lambda: calls_claim(
            claims=[(call.pk, call.attempts, requests[call.pk]) for call in calls], token=token
        ),
        until=until,
        settled=settled,
    )


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


def _reply_fields(
    call: JudgeCall, reply: ChatReply, cost: Decimal, output_format: str
) -> dict[str, Any]:
    """The fields a reply writes on its call: what came back, its cost, its parsed verdict."""
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
    return fields


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
    estimate = (
        call_cost_estimate(judge=call.run.judge, request=call_request(call=call))
        if recovered
        else Decimal(0)
    )
    fields = _reply_fields(call, reply, cost, output_format)

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


# The columns a batch of replies writes (_record_replies), with their SQL types; those after
# "parse_error" are written only when the reply sets them (a verdict, a grade).
_REPLY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "bigint"),
    ("raw_output", "text"),
    ("tokens_in", "integer"),
    ("tokens_out", "integer"),
    ("cost_usd", "numeric"),
    ("latency_ms", "integer"),
    ("model_version_reported", "text"),
    ("refusal", "boolean"),
    ("parse_error", "text"),
    ("likert_shown", "integer"),
    ("likert", "integer"),
    ("preference", "text"),
    ("score_a", "double precision"),
    ("score_b", "double precision"),
    ("verdict_label", "text"),
    ("values", "jsonb"),
    ("grade", "double precision"),
)
_REPLY_OPTIONAL = frozenset(
    (
        "likert_shown",
        "likert",
        "preference",
        "score_a",
        "score_b",
        "verdict_label",
        "values",
        "grade",
    )
)


def calls_replies_write(
    *, replies: list[tuple[JudgeCall, ChatReply, Decimal]], output_format: str, token: str
) -> set[int]:
    """Write a batch's replies and add their cost to the run's spend; the ids written.

    One transaction of two statements, whatever the batch's size: one UPDATE of the calls still
    held by this attempt's `token` (from a VALUES list, RETURNING what it wrote), and one of the
    run's spent_usd by what they cost, which also clears the run's stall reason. A call whose
    lease was taken back is not written, and its cost not counted. The calls are of one run.
    """
    rows = sorted(replies, key=lambda item: item[0].pk)
    run_id = rows[0][0].run_id
    now = timezone.now()
    values_sql = ", ".join(
        "(" + ", ".join(f"%s::{kind}" for _, kind in _REPLY_COLUMNS) + ")" for _ in rows
    )
    params: list[Any] = [JudgeCall.Status.DONE, now]
    costs: dict[int, Decimal] = {}
    for call, reply, cost in rows:
        fields = _reply_fields(call, reply, cost, output_format) | {"id": call.pk}
        costs[call.pk] = cost
        for column, _ in _REPLY_COLUMNS:
            value = fields.get(column)
            params.append(json.dumps(value) if column == "values" and value is not None else value)
    params += [token, JudgeCall.Status.RUNNING]
    names = ", ".join(f'"{column}"' for column, _ in _REPLY_COLUMNS)
    sets = ", ".join(
        f'"{column}" = COALESCE(v."{column}", "{CALLS}"."{column}")'
        if column in _REPLY_OPTIONAL
        else f'"{column}" = v."{column}"'
        for column, _ in _REPLY_COLUMNS[1:]
    )
    sql = (
        f'UPDATE "{CALLS}" SET "status" = %s, "finished_at" = %s, "error" = \'\', '
        f'"lease_expires_at" = NULL, "not_before" = NULL, {sets} '
        f"FROM (VALUES {values_sql}) AS v ({names}) "
        f'WHERE "{CALLS}"."id" = v."id" AND "{CALLS}"."lease_token" = %s '
        f'AND "{CALLS}"."status" = %s RETURNING "{CALLS}"."id"'
    )
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            written = {row[0] for row in cursor.fetchall()}
        if written:
            spent = sum((costs[pk] for pk in written), Decimal(0))
            JudgeRun.objects.filter(pk=run_id).update(
                spent_usd=F("spent_usd") + spent, stall_reason="", stall_since=None
            )
    return written


def _record_replies(
    fresh: list[tuple[JudgeCall, ChatReply]], token: str, judge: Judge, until: float
) -> set[int]:
    """Record a batch's replies (calls_replies_write), retried over dropped connections until
    `until` and checked by the token, as _record_reply is; the ids written."""
    replies = [(call, reply, _cost(judge, reply)) for call, reply in fresh]
    ids = [call.pk for call, _ in fresh]

    def landed() -> set[int] | None:
        done = set(
            JudgeCall.objects.filter(
                pk__in=ids, lease_token=token, status=JudgeCall.Status.DONE
            ).values_list("pk", flat=True)
        )
        return done or None

    return db_retry(
        lambda: calls_replies_write(
            replies=replies, output_format=judge.output_format, token=token
        ),
        until=until,
        settled=landed,
    )


_executor_lock = threading.Lock()
_executors: list[ThreadPoolExecutor] = []


def _executor() -> ThreadPoolExecutor:
    """The process's threads that send a batch's requests together (started on first use)."""
    with _executor_lock:
        if not _executors:
            _executors.append(
                ThreadPoolExecutor(
                    max_workers=max(1, settings.CONCORD_JUDGE_CALL_BATCH) * 32,
                    thread_name_prefix="judge-request",
                )
            )
        return _executors[0]


def _ask_all(
    judge: Judge,
    api_key: str,
    calls: list[JudgeCall],
    requests: dict[int, dict[str, Any]],
    keys: dict[int, str],
    identities: dict[int, str],
) -> dict[int, ChatReply | JudgeCallError]:
    """Send the claimed calls' requests together, each on a kept client of its thread, and
    journal each reply as soon as it is received; each call's reply or error."""

    def ask(call: JudgeCall) -> ChatReply | JudgeCallError:
        prepared = chat_client_kept(
            base_url=judge.base_url,
            api_key=api_key,
            timeout=settings.CONCORD_JUDGE_TIMEOUT_SECONDS,
        )
        try:
            reply = chat_complete(
                base_url=judge.base_url,
                api_key=api_key,
                model=judge.model_name,
                messages=requests[call.pk]["messages"],
                params=judge.params,
                idempotency_key=keys[call.pk],
                timeout=settings.CONCORD_JUDGE_TIMEOUT_SECONDS,
                prepared=prepared,
            )
        except JudgeCallError as exc:
            return exc
        reply_journal_write(
            idempotency_key=keys[call.pk],
            identity=identities[call.pk],
            attempt=call.attempts + 1,
            reply=reply,
        )
        return reply

    if len(calls) == 1:
        return {calls[0].pk: ask(calls[0])}
    return dict(zip([call.pk for call in calls], _executor().map(ask, calls), strict=True))


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


def _calls_load(call_ids: list[int]) -> dict[int, JudgeCall]:
    """The calls of a batch with their pair or answer, and their run with its judge and study:
    two statements. The run, judge and study are read once for the batch, not once a call (a
    ten-table join took 12 ms to plan, and made a model of each for every call)."""
    calls = list(
        JudgeCall.objects.select_related(
            "pair__prompt", "pair__answer_a", "pair__answer_b", "answer__prompt"
        )
        .filter(pk__in=call_ids)
        .order_by()  # by id below; the models' orderings cost the compiler more than the query
    )
    if not calls:
        return {}
    runs = JudgeRun.objects.select_related("judge", "study").filter(
        pk__in={call.run_id for call in calls}
    )
    by_id = {run.pk: run for run in runs.order_by()}
    loaded = {}
    for call in calls:
        # A run deleted between the two statements took its calls with it.
        if call.run_id in by_id:
            call.run = by_id[call.run_id]
            loaded[call.pk] = call
    return loaded


def _due_in(calls: list[JudgeCall], seconds: float) -> None:
    """Tell the reconciler that these pending calls' messages come back in `seconds` (a retry)."""
    grace = settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS
    JudgeCall.objects.filter(
        pk__in=[call.pk for call in calls], status=JudgeCall.Status.PENDING
    ).update(lease_expires_at=timezone.now() + timedelta(seconds=seconds + grace))


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


def judge_call_execute(*, call_id: int) -> CallOutcome:
    """Make one call if it is still pending, due and its run is running (a batch of one)."""
    return judge_calls_execute(call_ids=[call_id])[call_id]


def judge_calls_execute(*, call_ids: list[int]) -> dict[int, CallOutcome]:
    """Make the calls of one message that are still pending, due and of a running run; at most
    once per attempt. Return each call's outcome; one with `retry_in` is to be sent again then.

    Holds no lock. The batch is loaded in two statements and claimed in one conditional UPDATE;
    the requests go out together, outside any transaction, each with its own total deadline
    (CONCORD_JUDGE_TIMEOUT_SECONDS) below the lease, and each reply is journalled as it comes;
    the replies are then recorded, with the run's spend, in one short transaction of two
    statements. A call whose attempt cannot go on alone (an error, a journalled reply) takes the
    one-call steps, one conditional UPDATE each.
    """
    started = time.monotonic()
    loaded = db_retry(
        lambda: _calls_load(call_ids),
        until=started + settings.CONCORD_JUDGE_LEASE_SECONDS / 2,
    )
    outcomes: dict[int, CallOutcome] = {}
    by_run: dict[int, list[JudgeCall]] = {}
    now = timezone.now()
    for call_id in dict.fromkeys(call_ids):
        call = loaded.get(call_id)
        if call is None:
            outcomes[call_id] = CallOutcome("missing")
        elif call.status != JudgeCall.Status.PENDING:
            outcomes[call_id] = CallOutcome("skipped", detail=f"call is {call.status}")
        elif call.run.status != JudgeRun.Status.RUNNING:
            outcomes[call_id] = CallOutcome("skipped", detail=f"run is {call.run.status}")
        elif (early := _not_due(call, now)) is not None:
            outcomes[call_id] = early
        else:
            by_run.setdefault(call.run_id, []).append(call)
    for calls in by_run.values():
        outcomes |= _run_calls_execute(calls)
    return outcomes


def _run_calls_execute(calls: list[JudgeCall]) -> dict[int, CallOutcome]:  # noqa: C901 - the steps in order (judge_calls_execute)
    """Make due pending calls of one running run (judge_calls_execute)."""
    run, judge = calls[0].run, calls[0].run.judge
    if budget_reached(run=run):
        JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.RUNNING).update(
            status=JudgeRun.Status.BUDGET_REACHED, finished_at=timezone.now()
        )
        return {call.pk: CallOutcome("budget") for call in calls}
    if judge.kind != Judge.Kind.LLM:
        return {call.pk: _baseline_execute(call) for call in calls}

    requests = {call.pk: call_request(call=call) for call in calls}
    try:
        api_key = judge_api_key(judge=judge)
        base_url_check(judge.base_url)
    except (JudgeNotConfigured, UnsafeBaseURL) as exc:
        return {call.pk: _fail_unclaimed(call, requests[call.pk], str(exc)) for call in calls}
    outcomes: dict[int, CallOutcome] = {}
    calls, over = _within_budget(run, calls, requests)
    for call in over:
        outcomes[call.pk] = CallOutcome("pending", retry_in=0.0, detail="waits for the budget")
    # Take the rate-limit slots before the claim: a worker that waits never holds a lease, so
    # the reconciler cannot hand its calls to another worker while it sleeps. Only the first
    # call waits for its slot; the others take one only if it is free at once (a slot taken
    # long before its request leaves would let the batch's requests out together, over the
    # limit), and the rest of the batch is sent again for when the next slot comes free.
    slotted: list[JudgeCall] = []
    for index, call in enumerate(calls):
        tokens = tokens_estimate(judge=judge, messages=requests[call.pk]["messages"])
        try:
            if slotted:
                wait = rate_slot_try(
                    key=f"judge:{judge.pk}",
                    requests_per_window=judge.requests_per_minute,
                    tokens_per_window=judge.tokens_per_minute,
                    tokens=tokens,
                )
                if wait > 0:
                    raise RateLimitTimeout(wait)
            else:
                rate_slot_acquire(
                    key=f"judge:{judge.pk}",
                    requests_per_window=judge.requests_per_minute,
                    tokens_per_window=judge.tokens_per_minute,
                    tokens=tokens,
                    max_wait=settings.CONCORD_JUDGE_LEASE_SECONDS,
                )
        except RateLimitTimeout as exc:
            _due_in(calls[index:], exc.waited)
            for later in calls[index:]:
                outcomes[later.pk] = CallOutcome("pending", retry_in=exc.waited, detail=str(exc))
            break
        except redis.RedisError as exc:
            reason = (
                f"{RATE_LIMITER_STALL}: Redis at {url_label(settings.REDIS_URL)} does not answer "
                f"({exc}); the calls wait until it does (check REDIS_URL)"
            )
            run_stall_note(run_id=run.pk, reason=reason)
            delay = backoff_seconds(attempt=3, retry_after=None)
            _due_in(calls[index:], delay)
            for later in calls[index:]:
                outcomes[later.pk] = CallOutcome("pending", retry_in=delay, detail=reason)
            break
        slotted.append(call)
    if not slotted:
        return outcomes

    token = uuid.uuid4().hex
    until = write_deadline()
    won = _claim_many(slotted, requests, token, until)
    claimed = [call for call in slotted if call.pk in won]
    for call in slotted:
        if call.pk not in won:
            outcomes[call.pk] = CallOutcome("skipped", detail="claimed elsewhere")
    if not claimed:
        return outcomes
    keys = {call.pk: call_idempotency_key(call_id=call.pk) for call in claimed}
    identities = {call.pk: _identity(call) for call in claimed}
    # An earlier attempt's reply that never reached the database is recorded, not paid again.
    journaled = reply_journal_read_many(
        entries={keys[call.pk]: identities[call.pk] for call in claimed}
    )
    asked = [call for call in claimed if keys[call.pk] not in journaled]
    replies = _ask_all(judge, api_key, asked, requests, keys, identities)
    fresh: list[tuple[JudgeCall, ChatReply]] = []
    recorded: list[int] = []
    for call in claimed:
        attempt = call.attempts + 1
        entry = journaled.get(keys[call.pk])
        if entry is not None:
            logger.warning(
                "call %s: attempt %s records the reply attempt %s received at %s (journal)",
                call.pk,
                attempt,
                entry.attempt,
                entry.received_at,
            )
            written = _record_reply(
                call,
                token,
                entry.reply,
                _cost(judge, entry.reply),
                judge.output_format,
                until,
                recovered=True,
            )
            outcomes[call.pk] = _recorded_outcome(call, attempt, written)
            if written:
                recorded.append(call.pk)
            continue
        result = replies[call.pk]
        if isinstance(result, JudgeCallError):
            outcomes[call.pk] = _record_error(call, token, attempt, result, until)
        else:
            fresh.append((call, result))
    if fresh:
        written_ids = _record_replies(fresh, token, judge, until)
        for call, _ in fresh:
            outcomes[call.pk] = _recorded_outcome(call, call.attempts + 1, call.pk in written_ids)
        recorded += sorted(written_ids)
    reply_journal_forget_many(idempotency_keys=[keys[pk] for pk in recorded])
    db_retry(lambda: run_finish_if_complete(run_id=run.pk), until=until)
    return outcomes


def write_deadline() -> float:
    """The monotonic time by which every write after a claim must have landed: before the lease
    runs out and the reconciler hands the row to another worker (each request's own deadline is
    shorter still). Judge calls and reference calls hold the same lease."""
    return (
        time.monotonic()
        + settings.CONCORD_JUDGE_LEASE_SECONDS
        - settings.CONCORD_JUDGE_TIMEOUT_SECONDS / 4
    )


def _cost(judge: Judge, reply: ChatReply) -> Decimal:
    return cost_compute(judge=judge, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)


def _identity(call: JudgeCall) -> str:
    return call_identity(
        run_id=call.run_id,
        pair_id=call.pair_id if call.pair_id is not None else f"answer{call.answer_id}@{call.turn}",
        order=call.order,
        created_at=call.created_at,
    )


def _recorded_outcome(call: JudgeCall, attempt: int, recorded: bool) -> CallOutcome:
    if recorded:
        return CallOutcome("done")
    # The reconciler took the call back after the lease and counted this request as possibly
    # paid twice; the reply is not written over a new attempt, and stays in the journal for the
    # call's next claim.
    logger.warning("call %s: attempt %s lost its claim before recording", call.pk, attempt)
    return CallOutcome("lost")


def _baseline_execute(call: JudgeCall) -> CallOutcome:
    """Make one call of a baseline judge (no API, nothing paid)."""
    token = uuid.uuid4().hex
    until = time.monotonic() + settings.CONCORD_JUDGE_LEASE_SECONDS / 2
    request = {"baseline": call.run.judge.kind, "seed": call.run.seed}
    if not _claim_many([call], {call.pk: request}, token, until):
        return CallOutcome("skipped", detail="claimed elsewhere")
    _record_reply(call, token, _baseline_reply(call), Decimal(0), "likert", until)
    db_retry(lambda: run_finish_if_complete(run_id=call.run_id), until=until)
    return CallOutcome("done")


def _within_budget(
    run: JudgeRun, calls: list[JudgeCall], requests: dict[int, dict[str, Any]]
) -> tuple[list[JudgeCall], list[JudgeCall]]:
    """The calls of a batch that the run's budget still covers at their upper estimates (at
    least one), and those left for later: a batch never overshoots the cap by more than one call
    would."""
    if run.budget_usd is None:
        return calls, []
    left = run.budget_usd - run.spent_usd - run.exposure_usd
    judge = run.judge
    taken: list[JudgeCall] = []
    for call in calls:
        estimate = call_cost_estimate(judge=judge, request=requests[call.pk])
        if taken and estimate > left:
            break
        taken.append(call)
        left -= estimate
    return taken, calls[len(taken) :]


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
