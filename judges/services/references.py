"""A reference judge writes the reference answers a study's reference categories lack.

For each prompt of the study in the categories (the study's ``reference_categories`` unless
others are named) that has no reference yet, the named LLM judge is asked once, on the prompt's
first turn, with :data:`REFERENCE_PROMPT`, for a correct, concise answer; the reply is stored
through annotation.services.references, which keeps the frozen rule (a prompt that has a
reference, imported or written, keeps it). ``reference_source`` names the judge and its model.

The requests are sent outside any transaction, one at a time; a failed request (an HTTP error, a
refusal, an empty reply) is reported for its prompt and leaves it without a reference, so a later
run asks again. Prompts that have a reference are never asked: a second run sends nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings

from annotation.models import Prompt, Study
from annotation.services.references import prompt_reference_set
from core.errors import ApplicationError
from judges.llm.client import JudgeCallError, UnsafeBaseURL, chat_client, chat_complete
from judges.models import Judge
from judges.services.keys import judge_api_key

__all__ = ["REFERENCE_PROMPT", "ReferenceWriteResult", "reference_source", "references_write"]

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


def reference_source(judge: Judge) -> str:
    """The source a written reference records: the judge's name and model."""
    return f"judge:{judge.name} ({judge.model_name})"


def reference_messages(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": REFERENCE_SYSTEM},
        {"role": "user", "content": REFERENCE_PROMPT.replace("{question}", question)},
    ]


def references_write(
    *, study: Study, judge: Judge, categories: Sequence[str] | None = None
) -> ReferenceWriteResult:
    """Ask the judge for each missing reference of the study's reference categories; store them.

    Raises ApplicationError (JudgeNotConfigured, UnsafeBaseURL included) before any request when
    the judge cannot be called or no category is named.
    """
    if judge.kind != Judge.Kind.LLM:
        raise ApplicationError(f"{judge.name} is not an LLM judge: only one can write references")
    if judge.study_id is not None and judge.study_id != study.pk:
        raise ApplicationError(f"{judge.name} belongs to another study")
    if not judge.model_name or not judge.base_url:
        raise ApplicationError(f"{judge.name} needs a model name and a base URL")
    chosen = sorted(set(categories if categories else (study.reference_categories or [])))
    if not chosen:
        raise ApplicationError(
            f"study {study.slug} names no reference categories; name them with --categories "
            "or in the study's admin page"
        )
    api_key = judge_api_key(judge=judge)
    timeout = float(settings.CONCORD_JUDGE_TIMEOUT_SECONDS)
    chat_client(base_url=judge.base_url, api_key=api_key, timeout=timeout)  # checks the URL
    result = ReferenceWriteResult(categories=chosen, source=reference_source(judge))
    params = {
        key: value
        for key, value in (judge.params or {}).items()
        if key not in ("max_tokens", "max_completion_tokens")
    }
    params["max_tokens"] = REFERENCE_MAX_TOKENS
    prompts = list(
        Prompt.objects.filter(study=study, category__in=chosen, reference_turns__isnull=True)
        .order_by("pk")
        .only("pk", "external_id", "turns")
    )
    for prompt in prompts:
        question = str((prompt.turns or [""])[0])
        try:
            reply = chat_complete(
                base_url=judge.base_url,
                api_key=api_key,
                model=judge.model_name,
                messages=reference_messages(question),
                params=params,
                # One key per (judge, prompt): a gateway that honours it answers a repeated
                # request from its cache instead of charging again.
                idempotency_key=f"concord-reference-{judge.pk}-{prompt.pk}",
                timeout=timeout,
            )
        except (JudgeCallError, UnsafeBaseURL) as exc:
            reason = str(exc).replace(api_key, "[the key]") if api_key else str(exc)
            result.failed.append(ReferenceFailure(prompt.pk, prompt.external_id, reason))
            continue
        text = reply.content.strip()
        if reply.refusal or not text:
            reason = reply.refusal_reason or "the reply was empty"
            result.failed.append(ReferenceFailure(prompt.pk, prompt.external_id, reason))
            continue
        if prompt_reference_set(prompt_id=prompt.pk, reference_turns=[text], source=result.source):
            result.written.append(prompt.external_id)
        else:
            result.kept.append(prompt.external_id)
    return result
