"""Store a study's Contrast Instructions: prompt pairs with similar questions and their answers.

The pairs are computed elsewhere (the judges app owns the sentence encoder; annotation knows
neither judges nor leaderboard) and handed in here, so this service only checks and writes.
Items for workers come from `annotation.services.pairs.pairs_generate(strategy="contrast")`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from annotation.models import Answer, ContrastPair, ContrastSet, Prompt, Study, System
from core.errors import ApplicationError


class ContrastSetError(ApplicationError, ValueError):
    """A contrast set that cannot be stored as asked; the message says what is wrong and where."""


@dataclass(frozen=True)
class ContrastPairSpec:
    """One contrast pair to store: two prompts, the best answer of each, their questions' cosine."""

    prompt_a_id: int
    prompt_b_id: int
    answer_a_id: int
    answer_b_id: int
    similarity: float


@dataclass(frozen=True)
class ContrastSetStored:
    """The stored set and whether it was already there with the same pairs (idempotent rerun)."""

    contrast_set: ContrastSet
    created: bool


def _canonical(spec: ContrastPairSpec) -> ContrastPairSpec:
    if spec.prompt_a_id < spec.prompt_b_id:
        return spec
    return ContrastPairSpec(
        spec.prompt_b_id, spec.prompt_a_id, spec.answer_b_id, spec.answer_a_id, spec.similarity
    )


def _check(study: Study, specs: Sequence[ContrastPairSpec], low: float, high: float) -> None:
    prompts = set(Prompt.objects.filter(study=study).values_list("pk", flat=True))
    answers = {
        answer.pk: answer
        for answer in Answer.objects.filter(
            pk__in=[x for s in specs for x in (s.answer_a_id, s.answer_b_id)]
        ).only("pk", "prompt_id", "leak_flagged", "leak_cleared_at", "leak_remedy")
    }
    seen: dict[int, int] = {}
    for number, spec in enumerate(specs, start=1):
        where = f"contrast pair {number} (prompts {spec.prompt_a_id}, {spec.prompt_b_id})"
        if spec.prompt_a_id == spec.prompt_b_id:
            raise ContrastSetError(f"{where}: a prompt cannot be contrasted with itself.")
        for prompt_id, answer_id in (
            (spec.prompt_a_id, spec.answer_a_id),
            (spec.prompt_b_id, spec.answer_b_id),
        ):
            if prompt_id not in prompts:
                raise ContrastSetError(f"{where}: prompt {prompt_id} is not in {study.slug}.")
            if prompt_id in seen:
                raise ContrastSetError(
                    f"{where}: prompt {prompt_id} is already in contrast pair {seen[prompt_id]};"
                    " a prompt is in at most one pair of a set."
                )
            seen[prompt_id] = number
            answer = answers.get(answer_id)
            if answer is None or answer.prompt_id != prompt_id:
                raise ContrastSetError(
                    f"{where}: answer {answer_id} is not an answer to prompt {prompt_id}."
                )
            if not answer.usable_in_pairs:
                raise ContrastSetError(
                    f"{where}: answer {answer_id} is flagged for an identity leak and not cleared."
                )
        if not low <= spec.similarity <= high:
            raise ContrastSetError(
                f"{where}: cosine {spec.similarity:.3f} lies outside the window [{low}, {high}]."
            )


@transaction.atomic
def contrast_set_store(
    *,
    study: Study,
    seed: int,
    low: float,
    high: float,
    best: ContrastSet.Best,
    system: System | None,
    backbone: str,
    pairs: Sequence[ContrastPairSpec],
) -> ContrastSetStored:
    """Store the contrast pairs of `study` for `seed`, all of them or none.

    Each prompt must belong to the study, be in at most one pair, and come with one of its own
    usable answers; each cosine must lie in [low, high]. A set for this seed that already holds
    exactly these pairs and parameters is returned as is; a different one is an error (build
    with another seed). Locks the study row, so two builds of one study run one after the other.
    """
    if not pairs:
        raise ContrastSetError("A contrast set needs at least one pair.")
    if (best == ContrastSet.Best.SYSTEM) != (system is not None):
        raise ContrastSetError("Name a system exactly when the best answer is a system's.")
    if system is not None and system.study_id != study.pk:
        raise ContrastSetError(f"System {system} does not belong to study {study.slug}.")
    Study.objects.select_for_update().filter(pk=study.pk).values_list("pk", flat=True).get()
    specs = [_canonical(spec) for spec in pairs]
    _check(study, specs, low, high)  # numbers the pairs in the order they were handed in

    wanted = {(s.prompt_a_id, s.prompt_b_id, s.answer_a_id, s.answer_b_id) for s in specs}
    existing = ContrastSet.objects.filter(study=study, seed=seed).first()
    if existing is not None:
        stored = set(
            existing.pairs.values_list("prompt_a_id", "prompt_b_id", "answer_a_id", "answer_b_id")
        )
        same = (existing.low, existing.high, existing.best, existing.system_id) == (
            low,
            high,
            best,
            system.pk if system else None,
        )
        if same and stored == wanted and existing.backbone == backbone:
            return ContrastSetStored(existing, created=False)
        raise ContrastSetError(
            f"Study {study.slug} already has a contrast set for seed {seed} with other pairs or "
            f"parameters (window [{existing.low}, {existing.high}], best answer "
            f"{existing.best}); build with another seed."
        )
    contrast_set = ContrastSet.objects.create(
        study=study, seed=seed, low=low, high=high, best=best, system=system, backbone=backbone
    )
    ContrastPair.objects.bulk_create(
        ContrastPair(
            contrast_set=contrast_set,
            prompt_a_id=s.prompt_a_id,
            prompt_b_id=s.prompt_b_id,
            answer_a_id=s.answer_a_id,
            answer_b_id=s.answer_b_id,
            similarity=s.similarity,
        )
        for s in specs
    )
    return ContrastSetStored(contrast_set, created=True)
