"""Copies of chosen pairs into a new rationale-only study: the write behind the analysis's
follow-up study (AdvisorQA, Kim et al. 2024, asked people why the better answer of pairs two
judges disagree on is better). Which pairs, and why, is the caller's business; this module only
copies them, in the annotation app's own tables."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Answer, Pair, Preference, Prompt, Study, System
from annotation.services.roles import study_member_add

SLUG_MAX = 80


@dataclass(frozen=True)
class FollowupCopy:
    """The new draft study, and each copied pair's id by the id of the pair it copies."""

    study: Study
    pair_of: dict[int, int]


def _followup_slug(study: Study) -> str:
    """`<slug>-followup-N` with N one more than the highest taken."""
    base = f"{study.slug}-followup-"[: SLUG_MAX - 4]
    pattern = re.compile(re.escape(base) + r"(\d+)$")
    taken = [
        int(match.group(1))
        for slug in Study.objects.filter(slug__startswith=base).values_list("slug", flat=True)
        if (match := pattern.match(slug))
    ]
    return f"{base}{max(taken, default=0) + 1}"


@transaction.atomic
def followup_study_copy(
    *, study: Study, winners: Mapping[int, str], notes: str, user: User
) -> FollowupCopy:
    """Create the draft rationale-only study `<slug>-followup-N` holding copies of the study's
    pairs in `winners` (pair id -> the side, A or B in the pair's canonical terms, that the
    rationale-only form shows as better), and make `user` a member.

    The new study has the original's instructions, pay, overlap and time limit, no gold, and
    `notes`. The pairs' prompts, systems and answers are copied (answers in id order, so that a
    copied pair keeps its canonical order); each copy stores its shown winner in
    `Pair.rationale_winner`. Locks the original study's row, so that two requests get different
    follow-up numbers. ValidationError for no pairs, a pair of another study or a side that is
    not A or B; nothing is written then.
    """
    if not winners:
        raise ValidationError("A follow-up study needs at least one pair.")
    odd = sorted(pk for pk, side in winners.items() if side not in (Preference.A, Preference.B))
    if odd:
        raise ValidationError(f"The better side of pairs {odd} must be A or B.")
    Study.objects.select_for_update().get(pk=study.pk)
    originals = list(
        Pair.objects.filter(pk__in=winners, study=study)
        .select_related("prompt", "answer_a__system", "answer_b__system")
        .order_by("pk")
    )
    foreign = sorted(set(winners) - {pair.pk for pair in originals})
    if foreign:
        raise ValidationError(f"Pairs {foreign} are not pairs of the study {study.slug!r}.")
    slug = _followup_slug(study)
    number = slug.rsplit("-", 1)[-1]
    followup = Study.objects.create(
        slug=slug,
        name=f"{study.name}: follow-up {number}"[:200],
        description=study.description,
        instructions=study.instructions,
        notes=notes,
        status=Study.Status.DRAFT,
        form_likert=False,
        form_values=False,
        form_rationale_only=True,
        form_acceptability=False,
        form_axes=False,
        form_comment=study.form_comment,
        overlap=study.overlap,
        target_per_worker=study.target_per_worker,
        pay_per_judgment_cents=study.pay_per_judgment_cents,
        hourly_floor_cents=study.hourly_floor_cents,
        time_limit_seconds=study.time_limit_seconds,
        gold_share=0,
        categories=study.categories,
    )
    # One INSERT per table (not one per row): prompts, systems and answers are built first, in
    # the order the pairs meet them, so the answers' new ids keep the order they are built in.
    prompts: dict[int, Prompt] = {}
    systems: dict[int, System] = {}
    answers: dict[int, Answer] = {}

    def copy_answer(answer: Answer, prompt: Prompt) -> Answer:
        if answer.pk not in answers:
            system = answer.system
            if system.pk not in systems:
                systems[system.pk] = System(
                    study=followup,
                    name=system.name,
                    version=system.version,
                    decoding=system.decoding,
                )
            answers[answer.pk] = Answer(
                prompt=prompt,
                system=systems[system.pk],
                turns=answer.turns,
                rank=answer.rank,
                upvotes=answer.upvotes,
                leak_matches=answer.leak_matches,
                leak_flagged=answer.leak_flagged,
                leak_cleared_by=answer.leak_cleared_by,
                leak_cleared_at=answer.leak_cleared_at,
                leak_remedy=answer.leak_remedy,
                leak_note=answer.leak_note,
                original_turns=answer.original_turns,
            )
        return answers[answer.pk]

    copied: list[tuple[Pair, Prompt, Answer, Answer]] = []
    for pair in originals:
        source = pair.prompt
        if source.pk not in prompts:
            prompts[source.pk] = Prompt(
                study=followup,
                external_id=source.external_id,
                category=source.category,
                turns=source.turns,
            )
        prompt = prompts[source.pk]
        first, second = sorted((pair.answer_a, pair.answer_b), key=lambda a: a.pk)
        copied.append((pair, prompt, copy_answer(first, prompt), copy_answer(second, prompt)))
    Prompt.objects.bulk_create(list(prompts.values()))
    System.objects.bulk_create(list(systems.values()))
    Answer.objects.bulk_create(list(answers.values()))
    copies: list[Pair] = []
    for pair, prompt, new_a, new_b in copied:
        winner = winners[pair.pk]
        # An answer copied earlier for another pair may have the larger id: keep the copy
        # canonical (A has the smaller id) and name its winner in the copy's terms.
        if new_a.pk > new_b.pk:
            new_a, new_b = new_b, new_a
            winner = Preference.B if winner == Preference.A else Preference.A
        copies.append(
            Pair(
                study=followup,
                prompt=prompt,
                answer_a=new_a,
                answer_b=new_b,
                turn=pair.turn,
                source=Pair.Source.SAMPLE,
                rationale_winner=winner,
            )
        )
    Pair.objects.bulk_create(copies)
    pair_of = {pair.pk: copy.pk for (pair, *_), copy in zip(copied, copies, strict=True)}
    study_member_add(study=followup, user=user)
    return FollowupCopy(study=followup, pair_of=pair_of)
