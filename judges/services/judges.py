"""Writes and checks of judge configurations."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from annotation.models import Study
from judges.kinds import judge_kind
from judges.llm.client import (
    JudgeNotConfigured,
    UnsafeBaseURL,
    api_key_env_allowed,
    api_key_env_refusal,
    api_key_env_reserved,
    base_url_check,
)
from judges.llm.prompts import TEMPLATES, template_check, template_variables
from judges.models import Judge, OutputFormat, Turns, template_hash
from judges.services.keys import api_key_clean, api_key_encrypt, judge_api_key


def judge_validate(*, judge: Judge) -> None:
    """Raise ValidationError naming the field when an LLM judge's configuration is unusable.

    The key itself is not required here: a judge may be saved before its key is set, and then
    shows "not configured" until it is. Each template's braces are checked
    (prompts.template_check: an unknown or misspelt variable, one this template is not given,
    one written with spaces or a brace missing), so a judge made by judge_create, the admin or
    the templates page never sends a prompt with a variable left empty or unfilled.
    """
    if judge.kind != Judge.Kind.LLM:
        return
    errors = _connection_errors(judge) | _template_errors(judge)
    grading = judge.output_format == OutputFormat.GRADE
    messages = {field: [message] for field, message in errors.items()}
    for field in ("prompt_template", "reference_template", "multi_turn_template"):
        filled = template_variables(field=field, grading=grading)
        if problems := template_check(getattr(judge, field), filled=filled):
            messages.setdefault(field, []).extend(problems)
    if messages:
        raise ValidationError(messages)


def _connection_errors(judge: Judge) -> dict[str, str]:
    """What is wrong with where an LLM judge is asked: its base URL, model name and key
    variable, one message per field."""
    errors: dict[str, str] = {}
    if not judge.base_url:
        errors["base_url"] = "An LLM judge needs a base URL, e.g. https://api.openai.com/v1."
    else:
        try:
            base_url_check(judge.base_url)
        except UnsafeBaseURL as exc:
            errors["base_url"] = str(exc)
    if not judge.model_name:
        errors["model_name"] = "An LLM judge needs a model name, e.g. gpt-4o."
    if key_error := _api_key_env_error(judge):
        errors["api_key_env"] = key_error
    return errors


def _api_key_env_error(judge: Judge) -> str:
    """What is wrong with the judge's key variable ("" when nothing)."""
    name = judge.api_key_env
    if not name and not judge.api_key_encrypted:
        return "Name the environment variable that holds the key, or paste the key itself."
    if not name:
        return ""
    if not name.replace("_", "").isalnum() or name[0].isdigit():
        return f"{name!r} is not an environment variable name (letters, digits, _)."
    if api_key_env_reserved(name):
        return (
            f"{name} is one of Concord's own settings, not a judge's key; name the "
            "variable that holds the judge's API key (for example OPENAI_API_KEY)."
        )
    if not api_key_env_allowed(name):
        return api_key_env_refusal(name) + "."
    return ""


def _template_errors(judge: Judge) -> dict[str, str]:
    """What is wrong with an LLM judge's templates besides their braces: each must show what
    its kind of call gives it, one message per field."""
    errors: dict[str, str] = {}
    if not judge.prompt_template.strip():
        errors["prompt_template"] = "An LLM judge needs a prompt template."
    if judge.reference_template and "{reference}" not in judge.reference_template:
        errors["reference_template"] = (
            "A reference template shows the reference answer: write {reference} where it goes."
        )
    if judge.multi_turn_template and "{conversation}" not in judge.multi_turn_template:
        errors["multi_turn_template"] = (
            "A multi-turn template shows the conversation: write {conversation} where it goes."
        )
    if judge.output_format == OutputFormat.GRADE:
        for field in ("prompt_template", "reference_template"):
            text = getattr(judge, field)
            if text and "{answer}" not in text:
                errors.setdefault(
                    field, "A single-answer grading template shows its one answer as {answer}."
                )
    return errors


def judge_create(
    *,
    name: str,
    kind: str,
    model_name: str = "",
    base_url: str = "",
    api_key_env: str = "",
    template_name: str | None = None,
    prompt_template: str = "",
    output_format: str | None = None,
    params: dict[str, Any] | None = None,
    price_input_per_mtok: Decimal = Decimal(0),
    price_output_per_mtok: Decimal = Decimal(0),
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    order_policy: str = Judge.OrderPolicy.BOTH,
    study: Study | None = None,
    api_key: str = "",
    reference_guided: bool = False,
    reference_template: str = "",
    multi_turn: bool = False,
    multi_turn_template: str = "",
    turns: str = Turns.PAIR,
) -> Judge:
    """Create a judge, from a shipped template by name or from its own template text.

    `api_key` is a key pasted by a researcher: stored encrypted instead of `api_key_env`
    (judges.services.keys). `study` makes the judge that study's own. `reference_guided` takes
    the shipped template's reference variant as the judge's reference template (or give
    `reference_template` with a template text of its own). `multi_turn` takes the shipped
    template's multi-turn variant as the judge's multi-turn template (used for calls at turn 2
    and later, judges.services.turns), or give `multi_turn_template`; `turns` ``each`` judges
    every turn of a multi-turn prompt's pairs, not only the pair's own.
    """
    if turns not in Turns.values:
        raise ValidationError({"turns": f"turns must be one of {Turns.values}, not {turns!r}"})
    if template_name is not None:
        if template_name not in TEMPLATES:
            raise ValidationError(
                {"template_name": f"unknown template {template_name!r}; one of {sorted(TEMPLATES)}"}
            )
        template = TEMPLATES[template_name]
        prompt_template = template.text
        output_format = output_format or template.output_format
        if reference_guided:
            if not template.reference_text:
                raise ValidationError(
                    {"template_name": f"template {template_name!r} has no reference variant"}
                )
            reference_template = template.reference_text
        if multi_turn:
            if not template.multi_turn_text:
                raise ValidationError(
                    {"template_name": f"template {template_name!r} has no multi-turn variant"}
                )
            multi_turn_template = template.multi_turn_text
    judge = Judge(
        name=name,
        kind=kind,
        model_name=model_name,
        base_url=base_url,
        api_key_env=api_key_env,
        prompt_template=prompt_template,
        reference_template=reference_template,
        multi_turn_template=multi_turn_template,
        turns=turns,
        output_format=output_format or Judge._meta.get_field("output_format").default,
        params=params if params is not None else {"temperature": 0, "max_tokens": 512},
        price_input_per_mtok=price_input_per_mtok,
        price_output_per_mtok=price_output_per_mtok,
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
        order_policy=order_policy,
        study=study,
    )
    if judge.kind == Judge.Kind.LLM and judge.output_format == OutputFormat.GRADE:
        # Each answer is graded alone: the order of a pair cannot move its derived verdict.
        judge.order_invariant = True
        judge.order_policy = Judge.OrderPolicy.FIXED
    if api_key:
        try:
            judge.api_key_encrypted = api_key_encrypt(api_key_clean(api_key))
        except ValueError as exc:
            raise ValidationError({"api_key": str(exc)}) from exc
        judge.api_key_env = ""
        judge.api_key_set_at = timezone.now()
    judge.template_hash = template_hash(
        judge.prompt_template, judge.reference_template, judge.multi_turn_template
    )
    judge.full_clean()
    judge_validate(judge=judge)
    judge.save()
    return judge


def judge_readiness(*, judge: Judge) -> str:
    """Return "" when the judge can run now, or what is missing, e.g. "not configured: set X"."""
    return judge_kind(judge.kind).readiness(judge)


def llm_judge_readiness(*, judge: Judge) -> str:
    """ "" when the LLM judge's configuration is usable and its key is set, else what is not."""
    try:
        judge_validate(judge=judge)
    except ValidationError as exc:
        return "not configured: " + "; ".join(
            message for messages in exc.message_dict.values() for message in messages
        )
    try:
        judge_api_key(judge=judge)
    except JudgeNotConfigured as exc:
        return str(exc)
    return ""
