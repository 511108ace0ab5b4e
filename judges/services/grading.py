"""Single-answer grading and reference-guided prompts.

Single-answer grading (MT-Bench's "single answer grading", Zheng et al. 2023): a judge whose
output format is ``grade`` reads one answer alone and grades it from 1 to 10. Its run makes one
*grade call* per (answer, turn) of the run's pairs, not one per pair and order: an answer that is
in five pairs is graded once. A grade an earlier run of the same judge made, with the same
template and the same reference, is copied into the new run (cost 0, its request as sent and a
note of the call it came from) instead of being asked and paid for again. When the run's last
grade call is recorded, every pair's verdict is derived from its two answers' grades and written
as an ordinary pair call (shown A first; the judge is order-invariant), so every report section
reads it like any judge's.

The tie rule (:func:`grade_preference`): the higher grade wins; equal grades are a tie. It is the
rule FastChat applies when it compares single-answer grades pairwise (``win`` if greater,
``tie`` if equal). A pair whose grade is missing (the reply did not parse, was refused or the
call failed) gets a call with that said in its parse error and no verdict, as an unparseable
reply does. A contrast item's answers belong to two prompts, each graded under its own, so its
grades are not compared.

Reference-guided judging: a study names the categories whose prompts judges see with a
reference answer (``Study.reference_categories``, MT-Bench's math, reasoning and coding). A
judge with a reference template uses it for those prompts, with the prompt's reference answer
(``Prompt.reference_turns``, imported or written once by a reference judge and then frozen) in
place of ``{reference}``; other prompts, and judges without a reference template, use the plain
template. The reference is only ever in the judge's prompt as sent (stored on the call), never
on a worker's page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from annotation.models import Pair, Prompt, Study
from judges.llm.prompts import (
    conversation_block,
    conversation_render,
    question_render,
    template_render,
)
from judges.models import Judge, JudgeCall, JudgeRun, OutputFormat
from judges.services.turns import pair_call_turns

TIE_RULE = "the higher grade wins; equal grades are a tie"


def is_grading(judge: Judge) -> bool:
    """Whether the judge grades single answers (one call per answer, pair verdicts derived)."""
    return judge.kind == Judge.Kind.LLM and judge.output_format == OutputFormat.GRADE


def grade_preference(grade_a: float, grade_b: float) -> str:
    """The pair's preference from two grades: 'A', 'B' or 'tie' (TIE_RULE)."""
    if grade_a == grade_b:
        return "tie"
    return "A" if grade_a > grade_b else "B"


def reference_render(reference_turns: Sequence[str], turn: int) -> str:
    """The reference answer up to `turn`: the first turn alone, or each turn labelled."""
    turns = list(reference_turns)
    if turn <= 1:
        return turns[0] if turns else ""
    return "\n\n".join(
        f"(Reference, turn {index + 1}) {text}" for index, text in enumerate(turns[:turn])
    )


def reference_hash(text: str) -> str:
    """SHA-256 of a rendered reference, kept on the request so a copy can tell it unchanged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def uses_reference(*, judge: Judge, study: Study, prompt: Prompt) -> bool:
    """Whether the judge sees this prompt with its reference answer."""
    return bool(judge.reference_template) and prompt.category in (study.reference_categories or [])


def call_template(
    *, judge: Judge, study: Study, prompt: Prompt, turn: int
) -> tuple[str, str | None]:
    """The template text a call on this prompt uses, and the reference it shows (or None).

    The reference template for a prompt of the study's reference categories (at every turn);
    else the multi-turn template for a call at turn 2 or later, when the judge has one; else
    the prompt template.

    Raise ValidationError when the prompt needs a reference and has none (judge_run_start
    checks every prompt before a run is created, so a call meets this only if one was removed).
    """
    if not uses_reference(judge=judge, study=study, prompt=prompt):
        if turn >= 2 and judge.multi_turn_template:
            return judge.multi_turn_template, None
        return judge.prompt_template, None
    if not prompt.reference_turns:
        raise ValidationError(f"prompt {prompt.external_id!r} has no reference answer")
    return judge.reference_template, reference_render(prompt.reference_turns, turn)


def references_missing(*, judge: Judge, study: Study, pairs: Sequence[Pair]) -> list[str]:
    """External ids of the pairs' prompts that the judge would show a reference it lacks."""
    if not judge.reference_template or not study.reference_categories:
        return []
    prompt_ids = {pair.prompt_id for pair in pairs}
    return sorted(
        Prompt.objects.filter(pk__in=prompt_ids, category__in=list(study.reference_categories))
        .filter(reference_turns__isnull=True)
        .values_list("external_id", flat=True)
    )


def grade_content(
    *, judge: Judge, study: Study, prompt: Prompt, answer_turns: list[str], turn: int
) -> tuple[str, str | None]:
    """The filled prompt of a grade call and the reference it shows (or None)."""
    text, reference = call_template(judge=judge, study=study, prompt=prompt, turn=turn)
    prompt_turns = list(prompt.turns or [])
    content = template_render(
        text,
        question=question_render(prompt_turns, turn),
        answer=conversation_render(prompt_turns, answer_turns, turn),
        reference=reference or "",
        turn=turn,
        conversation=conversation_block(prompt_turns, [("Assistant", answer_turns)], turn),
    )
    return content, reference


def grade_calls_create(*, run: JudgeRun, pairs: Sequence[Pair], due: datetime) -> int:
    """Create the run's grade calls, one per (answer, turn) of its pairs; return how many wait.

    The turns are those its pairs are judged at (judges.services.turns.pair_call_turns: the
    pair's own, or every turn of the prompt for a judge that judges each turn).

    A grade that an earlier run of the same judge recorded with the same template hash and the
    same reference is copied, done, at no cost; the rest are pending (due for the reconciler at
    `due`). Runs inside judge_run_start's transaction.
    """
    judge = run.judge
    call_turns = pair_call_turns(turns=run.turns, pairs=pairs)
    needs = sorted(
        {
            (a, turn)
            for pair in pairs
            for turn in call_turns[pair.pk]
            for a in (pair.answer_a_id, pair.answer_b_id)
        }
    )
    references = _references_by_answer(judge=judge, study=run.study, needs=needs)
    earlier: dict[tuple[int, int], JudgeCall] = {}
    for call in (
        JudgeCall.objects.filter(
            run__judge=judge,
            answer_id__in={a for a, _ in needs},
            status=JudgeCall.Status.DONE,
            grade__isnull=False,
        )
        .exclude(run=run)
        .order_by("pk")
    ):
        assert call.answer_id is not None and call.turn is not None
        key = (call.answer_id, call.turn)
        sent = call.request or {}
        same = sent.get("template_hash") == judge.template_hash and sent.get(
            "reference_hash"
        ) == references.get(key)
        if same:
            earlier.setdefault(key, call)
    now = timezone.now()
    calls = []
    for answer_id, turn in needs:
        source = earlier.get((answer_id, turn))
        if source is None:
            calls.append(
                JudgeCall(
                    run=run, answer_id=answer_id, turn=turn, order="one", lease_expires_at=due
                )
            )
            continue
        copied: dict[str, Any] = dict(source.request) | {"reused_from_call": source.pk}
        calls.append(
            JudgeCall(
                run=run,
                answer_id=answer_id,
                turn=turn,
                order="one",
                status=JudgeCall.Status.DONE,
                request=copied,
                raw_output=source.raw_output,
                grade=source.grade,
                model_version_reported=source.model_version_reported,
                finished_at=now,
            )
        )
    JudgeCall.objects.bulk_create(calls)
    return sum(1 for call in calls if call.status == JudgeCall.Status.PENDING)


def _references_by_answer(
    *, judge: Judge, study: Study, needs: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], str | None]:
    """The reference hash each (answer, turn) is graded with (None: no reference)."""
    from annotation.models import Answer

    prompts = {
        answer.pk: answer.prompt
        for answer in Answer.objects.filter(pk__in={a for a, _ in needs}).select_related("prompt")
    }
    out: dict[tuple[int, int], str | None] = {}
    for answer_id, turn in needs:
        prompt = prompts[answer_id]
        if uses_reference(judge=judge, study=study, prompt=prompt) and prompt.reference_turns:
            out[(answer_id, turn)] = reference_hash(reference_render(prompt.reference_turns, turn))
        else:
            out[(answer_id, turn)] = None
    return out


def grade_pairs_derive(*, run_id: int) -> int:
    """Write each pair's call of a grading run from its two grades; return how many were written.

    Runs in the transaction that marks the run done (judges.services.calls.
    run_finish_if_complete), after its last grade call is recorded; written once (the calls'
    unique constraint, and the run's done status changes once).
    """
    grades = {
        (answer_id, turn): (pk, grade, error)
        for pk, answer_id, turn, grade, error in JudgeCall.objects.filter(
            run_id=run_id, answer__isnull=False
        ).values_list("pk", "answer_id", "turn", "grade", "parse_error")
    }
    now = timezone.now()
    calls = []
    run_turns = JudgeRun.objects.values_list("turns", flat=True).get(pk=run_id)
    pairs = list(Pair.objects.filter(judge_runs=run_id))
    call_turns = pair_call_turns(turns=run_turns, pairs=pairs)
    judged = [(pair, turn) for pair in pairs for turn in call_turns[pair.pk]]
    for judged_pair, turn in judged:
        pair_id, answer_a, answer_b, contrast = (
            judged_pair.pk,
            judged_pair.answer_a_id,
            judged_pair.answer_b_id,
            judged_pair.contrast_id,
        )
        call_a, grade_a, _ = grades.get((answer_a, turn), (None, None, ""))
        call_b, grade_b, _ = grades.get((answer_b, turn), (None, None, ""))
        call = JudgeCall(
            run_id=run_id,
            pair_id=pair_id,
            order=JudgeCall.Order.A_FIRST,
            turn=turn,
            status=JudgeCall.Status.DONE,
            request={
                "derived_from_grade_calls": {"A": call_a, "B": call_b},
                "order_invariant": True,
                "tie_rule": TIE_RULE,
            },
            raw_output=f"grade A = {_shown(grade_a)} (call {call_a}), "
            f"grade B = {_shown(grade_b)} (call {call_b})",
            score_a=grade_a,
            score_b=grade_b,
            attempts=0,
            latency_ms=0,
            finished_at=now,
        )
        if contrast is not None:
            call.parse_error = (
                "a contrast item's answers belong to two prompts, each graded under its own: "
                "their grades are not compared"
            )
        elif grade_a is None or grade_b is None:
            missing = [side for side, grade in (("A", grade_a), ("B", grade_b)) if grade is None]
            call.parse_error = f"no grade for answer {' and '.join(missing)}: see its grade call"
        else:
            call.preference = grade_preference(grade_a, grade_b)
            call.verdict_label = f"{_shown(grade_a)} vs {_shown(grade_b)}"
        calls.append(call)
    JudgeCall.objects.bulk_create(calls, batch_size=2000, ignore_conflicts=True)
    return len(calls)


def _shown(grade: float | None) -> str:
    return "none" if grade is None else f"{grade:g}"
