"""Every way of making an LLM judge checks its templates' variables before a call is paid."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from judges.llm.prompts import TEMPLATES
from judges.models import Judge, OutputFormat
from judges.services.judges import judge_create, judge_readiness

pytestmark = pytest.mark.django_db

LLM: dict[str, Any] = {
    "kind": Judge.Kind.LLM,
    "model_name": "gpt-4o",
    "base_url": "https://api.openai.com/v1",
    "api_key_env": "OPENAI_API_KEY",
}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_shipped_template_and_its_variants_pass_the_check(name: str) -> None:
    template = TEMPLATES[name]
    judge = judge_create(
        name=name,
        template_name=name,
        reference_guided=bool(template.reference_text),
        multi_turn=bool(template.multi_turn_text),
        **LLM,
    )
    assert judge.pk


def test_a_misspelt_variable_is_refused_with_its_line_and_a_suggestion() -> None:
    text = "Question: {question}\nFirst: {answer_frist}\nSecond: {answer_second}"
    with pytest.raises(ValidationError) as refused:
        judge_create(name="typo", prompt_template=text, output_format="likert", **LLM)
    assert refused.value.message_dict["prompt_template"] == [
        "Line 2: unknown variable {answer_frist}; did you mean {answer_first}?"
    ]
    assert not Judge.objects.exists()


def test_a_variable_the_template_is_not_given_is_refused() -> None:
    # {reference} is filled only in the reference template; in the plain one it would be empty.
    text = "{question}\n{answer_first}\n{answer_second}\nReference: {reference}"
    with pytest.raises(ValidationError) as refused:
        judge_create(name="ref", prompt_template=text, output_format="likert", **LLM)
    assert (
        "{reference} is not given to this template"
        in (refused.value.message_dict["prompt_template"][0])
    )
    # A grading template shows one answer: the pair's two are not given to it.
    grading = "{question}\n{answer_first}\n{answer}"
    with pytest.raises(ValidationError) as refused:
        judge_create(name="grade", prompt_template=grading, output_format=OutputFormat.GRADE, **LLM)
    assert (
        "{answer_first} is not given to this template"
        in (refused.value.message_dict["prompt_template"][0])
    )


def test_a_saved_judge_with_a_broken_template_is_not_ready_and_says_why() -> None:
    judge = Judge.objects.create(
        name="old", prompt_template="{ question } {answer_first} {answer_second}", **LLM
    )
    readiness = judge_readiness(judge=judge)
    assert readiness.startswith("not configured: Line 1: '{ question }' is not filled in")
