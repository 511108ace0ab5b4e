"""A researcher's own templates: check them, preview them on a real pair, try a sample reply,
and save them (judges/views/judges.JudgeTemplateView is the page).

The preview renders each call a run of the judge would make on one pair with the very function
the call itself uses (judges.services.calls.call_content) on a call that is never saved, so what
the page shows is what would be sent; nothing is asked of the judge's API.

A judge's templates decide what its calls mean, so they are frozen once the judge has a run:
its templates are then saved as a new judge (a copy with the same endpoint, key, prices and
options), and the old judge, its runs and their calls keep theirs. A judge without runs is
edited in place. judge_run_start locks the judge's row while it creates a run, and the edit
locks it too, so an edit and a run start never interleave: either the edit sees the run and is
refused, or the run's calls are all made with the edited templates.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Pair, Study
from core.db.rows import mark_new
from judges.llm.parsing import CanonicalVerdict, ParseResult, reply_parse, verdict_canonical
from judges.models import Judge, JudgeCall, JudgeRun, OutputFormat, template_hash
from judges.services.calls import call_content
from judges.services.grading import is_grading, uses_reference
from judges.services.judges import judge_validate
from judges.services.turns import pair_call_turns

TEMPLATE_FIELDS = ("prompt_template", "reference_template", "multi_turn_template")


@dataclass(frozen=True)
class TemplateDraft:
    """The templates and reply format a researcher typed, not yet saved."""

    prompt_template: str
    reference_template: str
    multi_turn_template: str
    output_format: str


@dataclass(frozen=True)
class PreviewCall:
    """One call of the preview: what it shows, which template it used, and the text as sent
    (or why it cannot be rendered)."""

    label: str
    template: str
    content: str = ""
    error: str = ""


@dataclass(frozen=True)
class ReplyCheck:
    """What the parser of a reply format reads in a sample reply, and the stored verdict in
    both orders (A shown first, B shown first) for a pairwise format."""

    result: ParseResult
    canonical: tuple[tuple[str, CanonicalVerdict], ...] = ()


def judge_draft(*, judge: Judge, draft: TemplateDraft) -> Judge:
    """An unsaved copy of the judge with the draft's templates and reply format."""
    candidate = copy.copy(judge)
    for field in TEMPLATE_FIELDS:
        setattr(candidate, field, getattr(draft, field))
    candidate.output_format = draft.output_format
    candidate.template_hash = template_hash(
        draft.prompt_template, draft.reference_template, draft.multi_turn_template
    )
    return candidate


def template_draft_check(*, judge: Judge, draft: TemplateDraft) -> None:
    """Raise ValidationError by field when the draft cannot be used by this judge.

    A pairwise template shows both answers, then what every LLM judge needs, braces included
    (judge_validate); a grading judge keeps the grade format and a pairwise judge a
    pairwise one, since the two make different calls (one per answer or one per order), and a
    pairwise template shows both answers.
    """
    grading = judge.output_format == OutputFormat.GRADE
    errors: dict[str, list[str]] = {}
    if draft.output_format not in OutputFormat.values:
        errors["output_format"] = [f"Unknown reply format {draft.output_format!r}."]
    elif (draft.output_format == OutputFormat.GRADE) != grading:
        errors["output_format"] = [
            "A grading judge grades one answer per call and a pairwise judge compares two: "
            "switching between them makes a different judge; create a new one instead."
        ]
    for field in TEMPLATE_FIELDS:
        text = getattr(draft, field)
        problems: list[str] = []
        if field != "multi_turn_template" and text and not grading:
            shows_both = "{answer_first}" in text and "{answer_second}" in text
            if not shows_both and "{conversation}" not in text:
                problems.append(
                    "A pairwise template shows both answers: write {answer_first} and "
                    "{answer_second} (or the whole {conversation})."
                )
        if problems:
            errors[field] = problems
    try:
        judge_validate(judge=judge_draft(judge=judge, draft=draft))
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            if field in TEMPLATE_FIELDS or field == "output_format":
                errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def _template_label(*, judge: Judge, study: Study, pair: Pair, turn: int) -> str:
    """Which of the judge's templates a call at `turn` uses (the rule of call_template)."""
    if uses_reference(judge=judge, study=study, prompt=pair.prompt):
        return "reference template"
    if turn >= 2 and judge.multi_turn_template:
        return "multi-turn template"
    return "prompt template"


def judge_template_preview(*, judge: Judge, study: Study, pair: Pair) -> list[PreviewCall]:
    """Every call a run of `judge` (saved or a judge_draft) would make on `pair`, rendered.

    A pairwise judge: one per judged turn (the pair's own, or each turn of its prompt for a
    judge that judges every turn) and order (both orders for a judge that uses both or picks one
    at random, A first for a fixed order). A grading judge: one per answer and judged turn.
    Each is rendered by call_content on an unsaved call, so its text is what would be sent. A
    prompt of a reference category without a reference answer gives that call an error.
    """
    run = JudgeRun(judge=judge, study=study, turns=judge.turns)
    turns = pair_call_turns(turns=judge.turns, pairs=[pair])[pair.pk]
    if is_grading(judge):
        planned = [
            (JudgeCall(run=run, answer=answer, order=JudgeCall.Order.ONE, turn=turn), label)
            for turn in turns
            for answer, label in ((pair.answer_a, "answer A"), (pair.answer_b, "answer B"))
        ]
    else:
        orders = (
            [JudgeCall.Order.A_FIRST]
            if judge.order_policy == Judge.OrderPolicy.FIXED
            else [JudgeCall.Order.A_FIRST, JudgeCall.Order.B_FIRST]
        )
        planned = [
            (JudgeCall(run=run, pair=pair, order=order, turn=turn), JudgeCall.Order(order).label)
            for turn in turns
            for order in orders
        ]
    calls = []
    for call, shown in planned:
        assert call.turn is not None
        label = f"Turn {call.turn}, {shown}"
        try:
            template = _template_label(judge=judge, study=study, pair=pair, turn=call.turn)
            content, _ = call_content(call=call)
        except ValidationError as exc:
            calls.append(PreviewCall(label=label, template="", error="; ".join(exc.messages)))
        else:
            calls.append(PreviewCall(label=label, template=template, content=content))
    return calls


def reply_check(*, output_format: str, reply: str) -> ReplyCheck:
    """Parse a sample reply as a call's reply would be parsed, and say what would be stored."""
    result = reply_parse(reply, output_format)
    if not result.ok or result.winner_shown is None:
        return ReplyCheck(result=result)
    return ReplyCheck(
        result=result,
        canonical=tuple(
            (JudgeCall.Order(order).label, verdict_canonical(result, order))
            for order in ("ab", "ba")
        ),
    )


def judge_templates_update(*, judge: Judge, draft: TemplateDraft) -> Judge:
    """Save the draft as the judge's templates; refuse once the judge has a run.

    Locks the judge's row (judge_run_start takes the same lock), then checks for runs, so no
    run can be created between the check and the write.
    """
    template_draft_check(judge=judge, draft=draft)
    with transaction.atomic():
        locked = Judge.objects.select_for_update().get(pk=judge.pk)
        runs = JudgeRun.objects.filter(judge=locked).count()
        if runs:
            raise ValidationError(
                f"{locked.name} has {runs} run{'s' if runs != 1 else ''}: its templates stay as "
                "its calls were made with. Save the edited templates as a new judge instead."
            )
        updated = judge_draft(judge=locked, draft=draft)
        updated.save(update_fields=[*TEMPLATE_FIELDS, "output_format", "template_hash"])
    return updated


def judge_templates_copy(*, judge: Judge, draft: TemplateDraft, name: str) -> Judge:
    """A new judge of the same study: the judge's endpoint, key, prices and options, with the
    draft's templates, named `name`."""
    name = name.strip()
    if not name:
        raise ValidationError({"new_name": "Name the new judge."})
    template_draft_check(judge=judge, draft=draft)
    if Judge.objects.filter(name=name).exists():
        raise ValidationError({"new_name": f"A judge named {name!r} exists; pick another name."})
    new = judge_draft(judge=judge, draft=draft)
    mark_new(new)
    new.name = name
    new.full_clean()
    new.save()
    return new
