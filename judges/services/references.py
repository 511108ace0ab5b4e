"""A reference judge writes the reference answers a study's reference categories lack.

For each prompt of the study in the categories (the study's ``reference_categories`` unless
others are named) that has no reference yet, the named LLM judge is asked once, on the prompt's
first turn, with :data:`REFERENCE_PROMPT`, for a correct, concise answer; the reply is stored
through annotation.services.references, which keeps the frozen rule (a prompt that has a
reference, imported or written, keeps it). ``reference_source`` names the judge and its model.

Every request is on the ledger (judges.models.ReferenceCall, one row per judge and prompt): the
request as sent, the reply, its tokens and cost, the error. As judge calls are
(judges.services.calls), each step is a conditional UPDATE of the row: a claim that takes a
pending or failed row (or a running one whose lease ran out) and leaves a token on it, then,
outside any transaction, the request, then the reply's write, which lands only while the row
still carries that token, in one short transaction with the prompt's reference. So two writers
never both ask for one prompt, and a done row is never asked again: a later write that finds a
prompt without a reference but a done row stores the recorded reply without a request. A failed
request (an HTTP error, a refusal, an empty reply) is recorded on its row and leaves the prompt
without a reference, so a later write asks again; a reply that was refused or empty was paid,
and its cost stays on the row beside the retry's. The requests wait for the judge's rate limit
(judges.ratelimit, the same window as its judge calls) and are sent one at a time.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import (
    Case,
    DateTimeField,
    F,
    PositiveSmallIntegerField,
    Q,
    Value,
    When,
)
from django.utils import timezone

from annotation.models import Prompt, Study
from annotation.services.references import prompt_reference_set
from core.broker import url_label
from core.errors import ApplicationError
from judges.llm.client import JudgeCallError, UnsafeBaseURL, chat_client, chat_complete
from judges.models import Judge, ReferenceCall
from judges.ratelimit import RateLimitTimeout, rate_slot_acquire
from judges.services.calls import cost_compute, db_retry, write_deadline
from judges.services.judges import judge_readiness
from judges.services.keys import judge_api_key

__all__ = [
    "REFERENCE_PROMPT",
    "ReferenceWriteResult",
    "reference_source",
    "references_write",
    "references_write_check",
]

REFERENCE_SYSTEM = "You write reference answers that graders use to check other answers."

REFERENCE_PROMPT = """Write a reference answer to the question below. Graders will compare other
answers with yours to decide whether they are right, so yours must be correct above all: work the
problem out, check the result, and state the final answer plainly. Keep it concise: the steps a
careful expert would show and the answer, no preamble, no remarks about the question.

[Question]
{question}
[End of question]"""

# A reference answer is longer than a judge's verdict: the judge's own token limit is not used.
REFERENCE_MAX_TOKENS = 2048


@dataclass(frozen=True)
class ReferenceFailure:
    prompt_id: int
    external_id: str
    reason: str


@dataclass
class ReferenceWriteResult:
    categories: list[str]
    source: str
    written: list[str] = field(default_factory=list)
    failed: list[ReferenceFailure] = field(default_factory=list)
    # Prompts that got a reference from elsewhere while their request was out (kept as set).
    kept: list[str] = field(default_factory=list)
    # Prompts whose reply was on the ledger already: stored without a new request.
    reused: list[str] = field(default_factory=list)
    cost_usd: Decimal = Decimal(0)


def reference_source(judge: Judge) -> str:
    """The source a written reference records: the judge's name and model."""
    return f"judge:{judge.name} ({judge.model_name})"


def reference_messages(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": REFERENCE_SYSTEM},
        {"role": "user", "content": REFERENCE_PROMPT.replace("{question}", question)},
    ]


def reference_idempotency_key(*, judge_id: int, prompt_id: int) -> str:
    """The first Idempotency-Key of a (judge, prompt) row; a gateway that honours it answers a
    repeated request from its cache instead of charging again."""
    return f"concord-reference-{judge_id}-{prompt_id}"


def references_write_check(
    *, study: Study, judge: Judge, categories: Sequence[str] | None = None
) -> list[str]:
    """The categories to write references for; raise ApplicationError (before any request) when
    the judge cannot write them: not an LLM judge, another study's, not ready (configuration,
    key), without prices (its requests would be on the ledger at no cost), or no category."""
    if judge.kind != Judge.Kind.LLM:
        raise ApplicationError(f"{judge.name} is not an LLM judge: only one can write references")
    if judge.study_id is not None and judge.study_id != study.pk:
        raise ApplicationError(f"{judge.name} belongs to another study")
    if not judge.model_name or not judge.base_url:
        raise ApplicationError(f"{judge.name} needs a model name and a base URL")
    problem = judge_readiness(judge=judge)
    if problem:
        raise ApplicationError(f"judge {judge.name!r} is {problem}")
    if judge.price_input_per_mtok <= 0 and judge.price_output_per_mtok <= 0:
        raise ApplicationError(
            f"judge {judge.name!r} has no prices: set its price per million input and output "
            "tokens, so that what its references cost is on the ledger and in the cost table"
        )
    chosen = sorted(set(categories if categories else (study.reference_categories or [])))
    if not chosen:
        raise ApplicationError(
            f"study {study.slug} names no reference categories; name them with --categories "
            "or in the study's admin page"
        )
    return chosen


def _request(judge: Judge, question: str) -> dict[str, Any]:
    """The request as it will be sent (without the key), stored on the row."""
    params = {
        key: value
        for key, value in (judge.params or {}).items()
        if key not in ("max_tokens", "max_completion_tokens")
    }
    params["max_tokens"] = REFERENCE_MAX_TOKENS
    return {
        "base_url": judge.base_url,
        "model": judge.model_name,
        "params": params,
        "messages": reference_messages(question),
    }


def references_write(
    *,
    study: Study,
    judge: Judge,
    categories: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReferenceWriteResult:
    """Ask the judge for each missing reference of the study's reference categories; store them.

    Holds no lock and opens no transaction around a request (the module's docstring). Raises
    ApplicationError (references_write_check, UnsafeBaseURL, JudgeNotConfigured) before any
    request when the judge cannot be called. `progress(done, total)` is told after each prompt.
    """
    chosen = references_write_check(study=study, judge=judge, categories=categories)
    api_key = judge_api_key(judge=judge)
    timeout = float(settings.CONCORD_JUDGE_TIMEOUT_SECONDS)
    chat_client(base_url=judge.base_url, api_key=api_key, timeout=timeout)  # checks the URL
    result = ReferenceWriteResult(categories=chosen, source=reference_source(judge))
    prompts = list(
        Prompt.objects.filter(study=study, category__in=chosen, reference_turns__isnull=True)
        .order_by("pk")
        .only("pk", "external_id", "turns")
    )
    ReferenceCall.objects.bulk_create(
        [
            ReferenceCall(
                study=study,
                prompt=prompt,
                judge=judge,
                idempotency_key=reference_idempotency_key(judge_id=judge.pk, prompt_id=prompt.pk),
            )
            for prompt in prompts
        ],
        ignore_conflicts=True,
    )
    rows = {
        row.prompt_id: row
        for row in ReferenceCall.objects.filter(judge=judge, prompt__in=[p.pk for p in prompts])
    }
    for index, prompt in enumerate(prompts):
        row = rows[prompt.pk]
        before = row.cost_usd
        reason = _reference_ask(row, prompt, judge, api_key, result)
        if reason:
            reason = reason.replace(api_key, "[the key]") if api_key else reason
            result.failed.append(ReferenceFailure(prompt.pk, prompt.external_id, reason))
        row.refresh_from_db(fields=["cost_usd"])
        result.cost_usd += row.cost_usd - before
        if progress is not None:
            progress(index + 1, len(prompts))
    return result


def _reference_ask(  # noqa: C901 - the row's steps in order (module docstring)
    row: ReferenceCall,
    prompt: Prompt,
    judge: Judge,
    api_key: str,
    result: ReferenceWriteResult,
) -> str:
    """Ask for one prompt's reference on its ledger row and store it; the failure's reason, or
    "" when the prompt got a reference (or had one set meanwhile)."""
    if row.status == ReferenceCall.Status.DONE:
        # Paid for already: the recorded reply is stored, never asked for again.
        if prompt_reference_set(
            prompt_id=prompt.pk, reference_turns=[row.reply.strip()], source=result.source
        ):
            ReferenceCall.objects.filter(pk=row.pk).update(stored=True)
            result.reused.append(prompt.external_id)
        else:
            result.kept.append(prompt.external_id)
        return ""
    request = _request(judge, str((prompt.turns or [""])[0]))
    # Take a rate-limit slot before the claim, as judge calls do: a writer that waits holds no
    # lease. The slots are the judge's own, shared with its judge calls.
    try:
        rate_slot_acquire(
            key=f"judge:{judge.pk}",
            requests_per_window=judge.requests_per_minute,
            tokens_per_window=judge.tokens_per_minute,
            tokens=sum(len(m["content"]) for m in request["messages"]) // 4 + REFERENCE_MAX_TOKENS,
            max_wait=settings.CONCORD_JUDGE_LEASE_SECONDS,
        )
    except RateLimitTimeout as exc:
        return f"not asked: {exc}"
    except redis.RedisError as exc:
        return f"not asked: the rate limiter's Redis at {url_label(settings.REDIS_URL)} ({exc})"
    token = uuid.uuid4().hex
    if not _claim(row, request, token):
        return "another writer is asking for it now"
    row.refresh_from_db(fields=["idempotency_key", "attempts"])
    mine = ReferenceCall.objects.filter(
        pk=row.pk, status=ReferenceCall.Status.RUNNING, lease_token=token
    )
    until = write_deadline()
    try:
        reply = chat_complete(
            base_url=judge.base_url,
            api_key=api_key,
            model=judge.model_name,
            messages=request["messages"],
            params=request["params"],
            idempotency_key=row.idempotency_key,
            timeout=float(settings.CONCORD_JUDGE_TIMEOUT_SECONDS),
        )
    except (JudgeCallError, UnsafeBaseURL) as exc:
        maybe_paid = isinstance(exc, JudgeCallError) and exc.maybe_paid
        message = f"attempt {row.attempts}: {exc}" + (
            " (the request may have been paid)" if maybe_paid else ""
        )
        db_retry(
            lambda: mine.update(
                status=ReferenceCall.Status.FAILED,
                error=message,
                unrecorded_requests=F("unrecorded_requests") + int(maybe_paid),
                lease_expires_at=None,
                finished_at=timezone.now(),
            ),
            until=until,
        )
        return message
    except BaseException:
        # Stopped mid-request (the task's time limit): the request may have been paid.
        mine.update(
            status=ReferenceCall.Status.FAILED,
            error=f"attempt {row.attempts}: stopped while the request was out "
            "(it may have been paid)",
            unrecorded_requests=F("unrecorded_requests") + 1,
            lease_expires_at=None,
            finished_at=timezone.now(),
        )
        raise
    cost = cost_compute(judge=judge, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out)
    paid: dict[str, Any] = {
        "reply": reply.content,
        "tokens_in": F("tokens_in") + reply.tokens_in,
        "tokens_out": F("tokens_out") + reply.tokens_out,
        "cost_usd": F("cost_usd") + cost,
        "latency_ms": reply.latency_ms,
        "model_version_reported": reply.model_reported[:200],
        "lease_expires_at": None,
        "finished_at": timezone.now(),
    }
    text = reply.content.strip()
    if reply.refusal or not text:
        message = f"attempt {row.attempts}: " + (reply.refusal_reason or "the reply was empty")
        # The next try must be generated anew, not answered with this reply from a cache.
        first_key = reference_idempotency_key(judge_id=judge.pk, prompt_id=prompt.pk)
        fresh_key = f"{first_key}-{row.attempts}"
        db_retry(
            lambda: mine.update(
                status=ReferenceCall.Status.FAILED,
                error=message,
                idempotency_key=fresh_key,
                **paid,
            ),
            until=until,
        )
        return message

    def record() -> bool | None:
        with transaction.atomic():
            stored = prompt_reference_set(
                prompt_id=prompt.pk, reference_turns=[text], source=result.source
            )
            if mine.update(status=ReferenceCall.Status.DONE, error="", stored=stored, **paid) != 1:
                transaction.set_rollback(True)
                return None
        return stored

    def landed() -> bool | None:
        done = ReferenceCall.objects.filter(
            pk=row.pk, lease_token=token, status=ReferenceCall.Status.DONE
        ).values_list("stored", flat=True)
        return next(iter(done), None)

    stored = db_retry(record, until=until, settled=landed)
    if stored is None:
        # The lease ran out and another writer took the row back (and counted this request).
        return f"attempt {row.attempts}: the reply came after the row's lease ran out"
    (result.written if stored else result.kept).append(prompt.external_id)
    return ""


def _claim(row: ReferenceCall, request: dict[str, Any], token: str) -> bool:
    """Take the row if it is pending or failed, or running past its lease (its worker died; the
    request it had out is counted as possibly paid); True if this writer won it. Every condition
    is on the row itself, so two concurrent claims cannot both win."""
    now = timezone.now()
    expired = Q(status=ReferenceCall.Status.RUNNING, lease_expires_at__lt=now)
    claimed = ReferenceCall.objects.filter(
        Q(status__in=[ReferenceCall.Status.PENDING, ReferenceCall.Status.FAILED]) | expired,
        pk=row.pk,
    ).update(
        unrecorded_requests=Case(
            When(status=ReferenceCall.Status.RUNNING, then=F("unrecorded_requests") + 1),
            default=F("unrecorded_requests"),
            output_field=PositiveSmallIntegerField(),
        ),
        status=ReferenceCall.Status.RUNNING,
        attempts=F("attempts") + 1,
        lease_token=token,
        lease_expires_at=now + timedelta(seconds=settings.CONCORD_JUDGE_LEASE_SECONDS),
        request=request,
        error="",
        started_at=Case(
            When(started_at__isnull=True, then=Value(now)),
            default=F("started_at"),
            output_field=DateTimeField(),
        ),
    )
    return claimed == 1
