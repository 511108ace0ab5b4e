"""Build a study's Contrast Instructions: pair prompts by question similarity, pick best answers.

The questions are embedded with the PL model's sentence encoder (`judges.reward.encoder`, cached
per text and backbone), paired by `leaderboard.stats.consistency.contrast_pairs_select`, and the
result is stored through annotation's `contrast_set_store` (leaderboard writes no annotation
table itself). Items for workers and pairwise judges then come from the "contrast" pair strategy.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from annotation.models import Answer, ContrastSet, HumanJudgment, Pair, Prompt, Study, System
from annotation.services.contrast import (
    ContrastPairSpec,
    ContrastSetStored,
    contrast_set_store,
)
from annotation.services.pairs import first_ranked_answer
from judges.reward.encoder import DEFAULT_BACKBONE, embed_texts
from leaderboard.stats.consistency import DEFAULT_WINDOW, ContrastSelection, contrast_pairs_select
from leaderboard.stats.majority import people_majority

BEST_REASONS = {
    ContrastSet.Best.FIRST_RANKED: "no answer ranked first on its own (no rank or upvotes, or a "
    "tie at the top)",
    ContrastSet.Best.MAJORITY: "no answer with the most majority wins in the people's judgments",
    ContrastSet.Best.SYSTEM: "no usable answer by the named system",
}


class ContrastBuildError(ValueError):
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


def _majority_best(study: Study, answers: dict[int, list[Answer]]) -> dict[int, Answer]:
    """Each prompt's answer with the most pairwise wins under the people's majority (a majority
    tie wins nothing); None, so left out, when no answer wins or two share the most wins."""
    rows = (
        HumanJudgment.objects.filter(study=study, excluded=False)
        .exclude(preference="")
        .exclude(pair__source=Pair.Source.CONTRAST)
        .values_list("pair_id", "preference")
    )
    frame = pd.DataFrame(list(rows), columns=["pair_id", "label"])
    majority = people_majority(frame)
    pairs = Pair.objects.filter(pk__in=majority.index.tolist()).values_list(
        "pk", "prompt_id", "answer_a_id", "answer_b_id"
    )
    wins: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for pair_id, prompt_id, answer_a_id, answer_b_id in pairs:
        label = majority[pair_id]
        if label in ("A", "B"):
            wins[prompt_id][answer_a_id if label == "A" else answer_b_id] += 1
    best: dict[int, Answer] = {}
    for prompt_id, tally in wins.items():
        ranked = sorted(tally.items(), key=lambda item: -item[1])
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            continue
        by_id = {answer.pk: answer for answer in answers.get(prompt_id, [])}
        if ranked[0][0] in by_id:
            best[prompt_id] = by_id[ranked[0][0]]
    return best


def best_answers_choose(
    *, study: Study, best: ContrastSet.Best, system: System | None = None
) -> dict[int, Answer]:
    """Return each prompt's best answer by `best`, keyed by prompt id; prompts without one are
    absent. Only usable answers (no uncleared identity leak) are considered.

    - first_ranked: the answer ranked 1 (or with the most upvotes), when unique;
    - majority: the answer with the most wins under the people's majority of each of the
      prompt's pairs (contrast items left out), when unique;
    - system: the named system's answer.
    """
    answers: dict[int, list[Answer]] = defaultdict(list)
    for answer in Answer.objects.filter(prompt__study=study).order_by("pk"):
        if answer.usable_in_pairs:
            answers[answer.prompt_id].append(answer)
    if best == ContrastSet.Best.FIRST_RANKED:
        chosen = {pid: first_ranked_answer(answers=group) for pid, group in answers.items()}
        return {pid: answer for pid, answer in chosen.items() if answer is not None}
    if best == ContrastSet.Best.MAJORITY:
        return _majority_best(study, answers)
    if system is None:
        raise ContrastBuildError("The best answer 'system' needs a system (--system NAME).")
    return {
        pid: answer
        for pid, group in answers.items()
        for answer in group
        if answer.system_id == system.pk
    }


def contrast_set_build(
    *,
    study: Study,
    seed: int = 0,
    low: float = DEFAULT_WINDOW[0],
    high: float = DEFAULT_WINDOW[1],
    best: ContrastSet.Best = ContrastSet.Best.FIRST_RANKED,
    system: System | None = None,
    backbone: str = DEFAULT_BACKBONE,
) -> ContrastBuild:
    """Pair the study's prompts whose first-turn questions have cosine in [low, high] and store
    them with each prompt's best answer; raise ContrastBuildError saying how many pairs were
    found and why none qualify when there are none.

    Only prompts with a best answer take part. Embedding happens before any transaction; the
    store is one transaction (all pairs or none).
    """
    if system is not None and system.study_id != study.pk:
        raise ContrastBuildError(f"System {system} does not belong to study {study.slug}.")
    prompts = list(Prompt.objects.filter(study=study).order_by("external_id", "pk"))
    chosen = best_answers_choose(study=study, best=best, system=system)
    usable = [prompt for prompt in prompts if prompt.pk in chosen]
    questions = [str((prompt.turns or [""])[0]) for prompt in usable]
    selection = contrast_pairs_select(
        embed_texts(questions, backbone=backbone), low=low, high=high, seed=seed
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
    return ContrastBuild(stored, selection, len(prompts), left_out, message)
