"""Build a study's Contrast Instructions: pair prompts by question similarity, pick best answers.

Each prompt's best answer is read by `leaderboard.selectors.contrast.best_answers_choose`; the
questions are embedded with the PL model's sentence encoder (`judges.reward.encoder`, cached
per text and backbone), paired by `leaderboard.stats.consistency.contrast_pairs_select`, and the
result is stored through annotation's `contrast_set_store` (leaderboard writes no annotation
table itself). Items for workers and pairwise judges then come from the "contrast" pair strategy.
Once stored, each done PL run of the study scores the set on the reward_model worker, queued
after commit through judges' `contrast_scorings_queue` (the report reads those scores).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from annotation.models import ContrastSet, Prompt, Study, System
from annotation.services.contrast import (
    ContrastPairSpec,
    ContrastSetStored,
    contrast_set_store,
)
from core.errors import ApplicationError
from judges.reward.contrast import contrast_scorings_queue
from judges.reward.encoder import DEFAULT_BACKBONE, embed_texts
from leaderboard.selectors.contrast import best_answers_choose
from leaderboard.stats.consistency import DEFAULT_WINDOW, ContrastSelection, contrast_pairs_select

BEST_REASONS = {
    ContrastSet.Best.FIRST_RANKED: "no answer ranked first on its own (no rank or upvotes, or a "
    "tie at the top)",
    ContrastSet.Best.MAJORITY: "no answer with the most majority wins in the people's judgments",
    ContrastSet.Best.SYSTEM: "no usable answer by the named system",
}


class ContrastBuildError(ApplicationError, ValueError):
    """No contrast set can be built as asked; the message says how many pairs were found and why
    none qualify."""


@dataclass(frozen=True)
class ContrastBuild:
    """A stored contrast set, the selection it came from, and the prompts it had to leave out."""

    stored: ContrastSetStored
    selection: ContrastSelection
    prompts: int
    prompts_without_best: int
    message: str


def contrast_set_build(
    *,
    study: Study,
    seed: int = 0,
    low: float = DEFAULT_WINDOW[0],
    high: float = DEFAULT_WINDOW[1],
    best: ContrastSet.Best = ContrastSet.Best.FIRST_RANKED,
    system: System | None = None,
    backbone: str = DEFAULT_BACKBONE,
    progress: Callable[[int, int], None] | None = None,
) -> ContrastBuild:
    """Pair the study's prompts whose first-turn questions have cosine in [low, high] and store
    them with each prompt's best answer; raise ContrastBuildError saying how many pairs were
    found and why none qualify when there are none.

    Only prompts with a best answer take part. Embedding happens before any transaction (and
    `progress` is told how many distinct questions are embedded, as embed_texts tells it); the
    store is one transaction (all pairs or none). Then the scoring of the set by each done PL
    run of the study that has not scored it is queued once the caller's transaction commits.
    """
    if system is not None and system.study_id != study.pk:
        raise ContrastBuildError(f"System {system} does not belong to study {study.slug}.")
    if best == ContrastSet.Best.SYSTEM and system is None:
        raise ContrastBuildError("The best answer 'system' needs a system (--system NAME).")
    prompts = list(Prompt.objects.filter(study=study).order_by("external_id", "pk"))
    chosen = best_answers_choose(study=study, best=best, system=system)
    usable = [prompt for prompt in prompts if prompt.pk in chosen]
    questions = [str((prompt.turns or [""])[0]) for prompt in usable]
    selection = contrast_pairs_select(
        embed_texts(questions, backbone=backbone, progress=progress), low=low, high=high, seed=seed
    )
    message = selection.explain()
    left_out = len(prompts) - len(usable)
    if left_out:
        message += f" {left_out} of {len(prompts)} prompts were left out: {BEST_REASONS[best]}."
    if not selection.pairs:
        raise ContrastBuildError(message)
    specs = [
        ContrastPairSpec(
            prompt_a_id=usable[i].pk,
            prompt_b_id=usable[j].pk,
            answer_a_id=chosen[usable[i].pk].pk,
            answer_b_id=chosen[usable[j].pk].pk,
            similarity=similarity,
        )
        for (i, j), similarity in zip(selection.pairs, selection.similarities, strict=True)
    ]
    stored = contrast_set_store(
        study=study,
        seed=seed,
        low=low,
        high=high,
        best=best,
        system=system,
        backbone=backbone,
        pairs=specs,
    )
    # The study's done PL runs score the set on the reward_model worker (the report only reads
    # their scores); a set found already stored queues only the scorings still missing.
    contrast_scorings_queue(study=study)
    return ContrastBuild(stored, selection, len(prompts), left_out, message)
