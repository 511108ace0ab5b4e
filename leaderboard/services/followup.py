"""A follow-up rationale-only study from the pairs where two judges disagree (AdvisorQA, Kim et
al. 2024, sampled 300 such pairs and asked people why the better answer is better)."""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System
from annotation.selectors.work import pair_rationale_winner
from annotation.services.roles import study_member_add
from judges.models import JudgeCall, JudgeRun

SLUG_MAX = 80


@dataclass(frozen=True)
class Disagreement:
    """A pair the two runs vote differently on, and the side the follow-up shows as better."""

    pair_id: int
    winner: str


def _run_votes(run: JudgeRun) -> dict[int, str]:
    """One vote per pair, combining orders as the report does: agreeing orders give their
    verdict, disagreeing orders a tie."""
    labels: dict[int, set[str]] = {}
    calls = JudgeCall.objects.filter(run=run, status=JudgeCall.Status.DONE).exclude(preference="")
    for pair_id, preference in calls.values_list("pair_id", "preference"):
        labels.setdefault(pair_id, set()).add(preference)
    return {pair_id: next(iter(s)) if len(s) == 1 else "tie" for pair_id, s in labels.items()}


def _people_majority(pair_ids: list[int]) -> dict[int, str]:
    """The people's decisive majority per pair: A or B when it is the unique most common label."""
    tallies: dict[int, Counter[str]] = {}
    rows = HumanJudgment.objects.filter(pair_id__in=pair_ids).exclude(preference="")
    for pair_id, preference in rows.values_list("pair_id", "preference"):
        tallies.setdefault(pair_id, Counter())[preference] += 1
    out = {}
    for pair_id, tally in tallies.items():
        (top, n), *rest = tally.most_common()
        if top in ("A", "B") and (not rest or rest[0][1] < n):
            out[pair_id] = top
    return out


def judge_disagreements_get(
    *, study: Study, judge_a_run: JudgeRun, judge_b_run: JudgeRun
) -> list[Disagreement]:
    """The study's pairs both runs voted on with different labels (a tie differs from A and B)
    and a known better side: the gold side or the answers' ranks, else the people's decisive
    majority. Sorted by pair id."""
    votes_a, votes_b = _run_votes(judge_a_run), _run_votes(judge_b_run)
    differing = sorted(
        pair_id for pair_id in set(votes_a) & set(votes_b) if votes_a[pair_id] != votes_b[pair_id]
    )
    pairs = Pair.objects.filter(study=study, pk__in=differing).select_related(
        "answer_a", "answer_b"
    )
    majority = _people_majority(differing)
    out = []
    for pair in sorted(pairs, key=lambda p: p.pk):
        winner = pair_rationale_winner(pair=pair) or majority.get(pair.pk)
        if winner is not None:
            out.append(Disagreement(pair_id=pair.pk, winner=winner))
    return out


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
def followup_study_create(
    *,
    study: Study,
    judge_a_run: JudgeRun,
    judge_b_run: JudgeRun,
    sample_size: int = 300,
    seed: int = 0,
    user: User,
) -> Study:
    """Create a draft rationale-only study of up to `sample_size` pairs where the two runs
    disagree, sampled with `seed`, and make `user` a member.

    Copies the pairs' prompts, systems and answers; each new pair records the side shown as
    better (`rationale_winner`). Locks the original study's row so that two requests get
    different follow-up numbers.
    """
    if judge_a_run.study_id != study.pk or judge_b_run.study_id != study.pk:
        raise ValidationError("Both judge runs must belong to the study.")
    if judge_a_run.pk == judge_b_run.pk:
        raise ValidationError("Choose two different judge runs.")
    if sample_size < 1:
        raise ValidationError(f"The sample size must be at least 1, not {sample_size}.")
    Study.objects.select_for_update().get(pk=study.pk)
    found = judge_disagreements_get(study=study, judge_a_run=judge_a_run, judge_b_run=judge_b_run)
    if not found:
        raise ValidationError(
            "The two runs disagree on no pair with a known better answer; nothing to follow up."
        )
    chosen = sorted(
        random.Random(seed).sample(found, min(sample_size, len(found))), key=lambda d: d.pair_id
    )
    winner_of = {d.pair_id: d.winner for d in chosen}
    originals = list(
        Pair.objects.filter(pk__in=winner_of)
        .select_related("prompt", "answer_a__system", "answer_b__system")
        .order_by("pk")
    )
    slug = _followup_slug(study)
    number = slug.rsplit("-", 1)[-1]
    followup = Study.objects.create(
        slug=slug,
        name=f"{study.name}: follow-up {number}"[:200],
        description=study.description,
        instructions=study.instructions,
        notes=(
            f"Follow-up of {study.slug}: {len(chosen)} of the {len(found)} pairs where "
            f"{judge_a_run.judge.name} (run {judge_a_run.pk}) and {judge_b_run.judge.name} "
            f"(run {judge_b_run.pk}) vote differently, sampled with seed {seed}. The better "
            "answer shown comes from the gold side or the answers' ranks, else from the people's "
            "majority."
        ),
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
    prompts: dict[int, Prompt] = {}
    systems: dict[int, System] = {}
    answers: dict[int, Answer] = {}

    def copy_answer(answer: Answer, prompt: Prompt) -> Answer:
        if answer.pk not in answers:
            system = answer.system
            if system.pk not in systems:
                systems[system.pk] = System.objects.create(
                    study=followup,
                    name=system.name,
                    version=system.version,
                    decoding=system.decoding,
                )
            answers[answer.pk] = Answer.objects.create(
                prompt=prompt,
                system=systems[system.pk],
                turns=answer.turns,
                rank=answer.rank,
                upvotes=answer.upvotes,
                leak_matches=answer.leak_matches,
                leak_flagged=answer.leak_flagged,
                leak_cleared_by=answer.leak_cleared_by,
                leak_cleared_at=answer.leak_cleared_at,
            )
        return answers[answer.pk]

    for pair in originals:
        source = pair.prompt
        if source.pk not in prompts:
            prompts[source.pk] = Prompt.objects.create(
                study=followup,
                external_id=source.external_id,
                category=source.category,
                turns=source.turns,
            )
        prompt = prompts[source.pk]
        # Answers are copied in id order, so a copied pair keeps its canonical order.
        first, second = sorted((pair.answer_a, pair.answer_b), key=lambda a: a.pk)
        new_a, new_b = copy_answer(first, prompt), copy_answer(second, prompt)
        winner = winner_of[pair.pk]
        if new_a.pk > new_b.pk:
            new_a, new_b = new_b, new_a
            winner = "B" if winner == "A" else "A"
        Pair.objects.create(
            study=followup,
            prompt=prompt,
            answer_a=new_a,
            answer_b=new_b,
            turn=pair.turn,
            source=Pair.Source.SAMPLE,
            rationale_winner=winner,
        )
    study_member_add(study=followup, user=user)
    return followup
