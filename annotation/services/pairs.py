"""Generate the pairs a study rates: all system pairs, pairs against a baseline, a sample, gold,
and contrast items from a stored contrast set.

Every generator is idempotent: it computes the pairs it wants, skips those already stored and
creates the rest, and says how many of each it found. Pairs are stored in canonical order
(answer_a_id < answer_b_id), one row per turn; the database refuses anything else.

Locking: each generator opens a transaction and locks the study row (`SELECT ... FOR UPDATE`),
so two generations for the same study run one after the other and never race on the unique
(answer_a, answer_b, turn) constraint. Generations for different studies do not wait.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from django.db import transaction

from annotation.models import Answer, ContrastSet, Pair, Prompt, Study, System
from core.conventions import GOLD_KINDS, GoldKind
from core.errors import ApplicationError

Strategy = Literal["all", "baseline", "sample", "contrast"]
TurnsSpec = Literal["all", "last"] | Sequence[int]
STRATEGIES: tuple[Strategy, ...] = ("all", "baseline", "sample", "contrast")
_SOURCES: dict[Strategy, Pair.Source] = {
    "all": Pair.Source.ALL_PAIRS,
    "baseline": Pair.Source.BASELINE,
    "sample": Pair.Source.SAMPLE,
    "contrast": Pair.Source.CONTRAST,
}

Progress = Callable[[int, int], None]
"""Told (written, total) as a generation writes its pairs: once before the first batch, then
after each batch of PAIRS_WRITE_BATCH rows (pairs_jobs shows it on the pairs page)."""
PAIRS_WRITE_BATCH = 1000

AnswerKey = tuple[int, int]
"""An unordered pair of answers in canonical order: (smaller id, larger id)."""


class PairsGenerationError(ApplicationError, ValueError):
    """A request to generate pairs that cannot be carried out; the message says why."""


@dataclass(frozen=True)
class PairsResult:
    """What one generation did.

    created: pairs written now; already_present: pairs it wanted that were already stored;
    skipped_answers: answers left out because an identity leak is flagged and not cleared;
    marked_gold: existing regular pairs turned into gold pairs (gold generation only);
    prompts_without_baseline: prompts where the baseline has no usable answer (baseline only).
    """

    created: int = 0
    already_present: int = 0
    skipped_answers: int = 0
    marked_gold: int = 0
    prompts_without_baseline: int = 0


def canonical_key(first: int, second: int) -> AnswerKey:
    """Return two answer ids in canonical order (smaller first)."""
    if first == second:
        raise PairsGenerationError(f"An answer cannot be paired with itself (answer {first}).")
    return (first, second) if first < second else (second, first)


def prompt_turns_select(*, turn_count: int, turns: TurnsSpec) -> list[int]:
    """Return the 1-based turns of a prompt with `turn_count` user turns that `turns` selects.

    A prompt without stored turns counts as one turn. Listed turns beyond the prompt's last
    turn are left out for that prompt (a 2-turn selection does not apply to 1-turn prompts).
    """
    count = max(1, turn_count)
    if turns == "all":
        return list(range(1, count + 1))
    if turns == "last":
        return [count]
    return sorted({turn for turn in turns if turn <= count})


def _turns_validate(turns: object) -> TurnsSpec:
    if turns in ("all", "last"):
        return turns
    if isinstance(turns, str) or not isinstance(turns, Sequence) or not turns:
        raise PairsGenerationError(
            f"turns must be 'all', 'last' or a non-empty list of turn numbers, not {turns!r}."
        )
    bad = [turn for turn in turns if not isinstance(turn, int) or turn < 1]
    if bad:
        raise PairsGenerationError(f"Turn numbers start at 1; these are not valid: {bad!r}.")
    return list(turns)


def pairs_sample(*, candidates: Sequence[AnswerKey], k: int, rng: random.Random) -> list[AnswerKey]:
    """Return k of the candidates drawn without replacement (all of them when there are fewer).

    The candidates are sorted first, so the draw depends only on the set and the generator.
    """
    ordered = sorted(candidates)
    if len(ordered) <= k:
        return ordered
    return sorted(rng.sample(ordered, k))


def _prompt_rng(seed: int, prompt: Prompt) -> random.Random:
    # One generator per prompt, seeded from the run's seed and the prompt's external id: the
    # draw for a prompt does not change when other prompts are added, and two copies of a study
    # (same external ids) draw the same pairs.
    return random.Random(f"{seed}:{prompt.external_id}")


def _study_lock(study: Study) -> None:
    Study.objects.select_for_update().filter(pk=study.pk).values_list("pk", flat=True).get()


def _answers_by_prompt(study: Study) -> tuple[list[Prompt], dict[int, list[Answer]]]:
    prompts = list(Prompt.objects.filter(study=study).order_by("external_id", "pk"))
    answers: dict[int, list[Answer]] = defaultdict(list)
    rows = Answer.objects.filter(prompt__study=study).order_by("pk")
    for answer in rows.only(
        "pk",
        "prompt_id",
        "system_id",
        "rank",
        "upvotes",
        "leak_flagged",
        "leak_cleared_at",
        "leak_remedy",
    ):
        answers[answer.prompt_id].append(answer)
    return prompts, answers


def _existing_pairs(study: Study) -> dict[tuple[int, int, int], Pair]:
    """The study's pairs of answers to one prompt by (answer_a, answer_b, turn); contrast items,
    whose answers belong to two prompts, are left out (no other pair can share their answers)."""
    # order_by() drops Pair's Meta.ordering, which would join half the schema for nothing.
    pairs = (
        Pair.objects.filter(study=study)
        .exclude(source=Pair.Source.CONTRAST)
        .order_by()
        .only("pk", "answer_a_id", "answer_b_id", "turn", "is_gold", "prompt_id")
    )
    return {(pair.answer_a_id, pair.answer_b_id, pair.turn): pair for pair in pairs}


def _pairs_write(rows: Sequence[Pair], progress: Progress | None) -> None:
    """Insert the new pairs in batches of PAIRS_WRITE_BATCH, telling `progress` after each."""
    if progress is not None:
        progress(0, len(rows))
    for start in range(0, len(rows), PAIRS_WRITE_BATCH):
        Pair.objects.bulk_create(rows[start : start + PAIRS_WRITE_BATCH])
        if progress is not None:
            progress(min(start + PAIRS_WRITE_BATCH, len(rows)), len(rows))


def _usable(answers: Iterable[Answer]) -> tuple[list[Answer], int]:
    usable: list[Answer] = []
    skipped = 0
    for answer in answers:
        if answer.usable_in_pairs:
            usable.append(answer)
        else:
            skipped += 1
    return usable, skipped


@transaction.atomic
def pairs_generate(
    *,
    study: Study,
    strategy: Strategy,
    baseline_system: System | None = None,
    k: int | None = None,
    turns: TurnsSpec = "all",
    seed: int = 0,
    progress: Progress | None = None,
) -> PairsResult:
    """Create the study's regular pairs by `strategy`, one pair per selected turn.

    - "all": per prompt, every unordered pair of usable answers (n answers: n(n-1)/2 pairs).
    - "baseline": per prompt, every other system's usable answer against `baseline_system`'s;
      prompts where the baseline has no usable answer get no pairs and are counted.
    - "sample": per prompt, k answer pairs drawn without replacement from all usable pairs with
      `random.Random(f"{seed}:{external_id}")`; a prompt with fewer than k candidates gets all.
      Answer pairs the prompt already has at the selected turns count towards its k (gold or
      not), so re-running with the same or another seed never grows a prompt beyond k.

    - "contrast": the items of the study's contrast set for `seed` (see `contrast_items_create`).

    Answers flagged for an identity leak and not cleared are left out and counted. Each chosen
    answer pair gets one pair per turn in `turns` ("all": 1..N, "last": N, or a list).
    `progress` is told how many of the new pairs are written as they are. Locks the study row
    for the transaction.
    """
    if strategy not in STRATEGIES:
        raise PairsGenerationError(
            f"Unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}."
        )
    if strategy == "contrast":
        return contrast_items_create(study=study, seed=seed)
    turns = _turns_validate(turns)
    if strategy == "baseline":
        if baseline_system is None:
            raise PairsGenerationError("The baseline strategy needs a baseline system.")
        if baseline_system.study_id != study.pk:
            raise PairsGenerationError(
                f"System {baseline_system} does not belong to study {study.slug}."
            )
    if strategy == "sample" and (k is None or k < 1):
        raise PairsGenerationError(f"The sample strategy needs k >= 1 pairs per prompt, not {k}.")

    _study_lock(study)
    prompts, answers_by_prompt = _answers_by_prompt(study)
    existing = _existing_pairs(study)
    source = _SOURCES[strategy]
    to_create: list[Pair] = []
    already_present = 0
    skipped_answers = 0
    prompts_without_baseline = 0

    for prompt in prompts:
        usable, skipped = _usable(answers_by_prompt.get(prompt.pk, []))
        skipped_answers += skipped
        selected_turns = prompt_turns_select(turn_count=prompt.turn_count, turns=turns)
        if not selected_turns:
            continue
        if strategy == "baseline":
            assert baseline_system is not None
            base = next((a for a in usable if a.system_id == baseline_system.pk), None)
            if base is None:
                prompts_without_baseline += 1
                continue
            keys = [canonical_key(base.pk, other.pk) for other in usable if other is not base]
        else:
            keys = [canonical_key(x.pk, y.pk) for x, y in itertools.combinations(usable, 2)]
            if strategy == "sample":
                assert k is not None
                present = {
                    key for key in keys if any((*key, turn) in existing for turn in selected_turns)
                }
                missing = [key for key in keys if key not in present]
                drawn = pairs_sample(
                    candidates=missing, k=max(0, k - len(present)), rng=_prompt_rng(seed, prompt)
                )
                keys = sorted(present) + drawn
        for answer_a_id, answer_b_id in sorted(keys):
            for turn in selected_turns:
                if (answer_a_id, answer_b_id, turn) in existing:
                    already_present += 1
                    continue
                to_create.append(
                    Pair(
                        study=study,
                        prompt=prompt,
                        answer_a_id=answer_a_id,
                        answer_b_id=answer_b_id,
                        turn=turn,
                        source=source,
                    )
                )
    _pairs_write(to_create, progress)
    return PairsResult(
        created=len(to_create),
        already_present=already_present,
        skipped_answers=skipped_answers,
        prompts_without_baseline=prompts_without_baseline,
    )


def _rank_order(answers: Sequence[Answer]) -> tuple[list[Answer], bool]:
    """Return the answers best first and whether rank decided: by rank (1 = best) when two or
    more carry one, else by upvotes (more = better); answers without that measure are left out."""
    ranked = [answer for answer in answers if answer.rank is not None]
    if len(ranked) >= 2:
        return sorted(ranked, key=lambda answer: (answer.rank, answer.pk)), True
    voted = [answer for answer in answers if answer.upvotes is not None]
    return sorted(voted, key=lambda answer: (-(answer.upvotes or 0), answer.pk)), False


def first_ranked_answer(*, answers: Sequence[Answer]) -> Answer | None:
    """Return the prompt's first-ranked answer (rank 1 = best, else the most upvotes), or None
    when no answer carries a rank or upvotes, or when two share the top place."""
    order, by_rank = _rank_order(answers)
    if not order:
        return None
    if len(order) >= 2:
        top, second = order[0], order[1]
        tied = top.rank == second.rank if by_rank else top.upvotes == second.upvotes
        if tied:
            return None
    return order[0]


def gold_pair_choose(*, answers: Sequence[Answer], kind: GoldKind) -> tuple[Answer, Answer] | None:
    """Return (better, worse) answers for a gold pair of `kind`, or None when the ranking does not
    say which is better (fewer than two ranked answers, or the two compared are tied)."""
    order, by_rank = _rank_order(answers)
    if len(order) < 2:
        return None
    better = order[0]
    worse = order[-1] if kind == "first_vs_last" else order[1]

    def measure(answer: Answer) -> int:
        # Smaller is better under both measures.
        return (answer.rank or 0) if by_rank else -(answer.upvotes or 0)

    if measure(better) >= measure(worse):
        return None
    return better, worse


def gold_target(*, gold_share: Decimal, regular: int) -> int | None:
    """Return how many gold pairs make gold / (gold + regular) closest to gold_share:
    round(gold_share * regular / (1 - gold_share)), halves rounding up; None for "no limit"
    (gold_share = 1)."""
    if gold_share >= 1:
        return None
    return math.floor(gold_share * regular / (1 - gold_share) + Decimal("0.5"))


@transaction.atomic
def gold_pairs_generate(
    *,
    study: Study,
    kind: GoldKind = "first_vs_last",
    seed: int = 0,
    progress: Progress | None = None,
) -> PairsResult:
    """Add gold pairs from ranked prompts until the study's gold share is reached.

    A ranked prompt (two or more usable answers with a rank, or else with upvotes, where more
    upvotes is better) gives one gold pair at its last turn: its first-ranked answer against its
    last-ranked ("first_vs_last") or second-ranked ("first_vs_second") answer, with gold_side
    the side of the better answer in canonical order. Prompts where those two are tied give none.

    How many: prompts are taken in an order shuffled with `random.Random(seed)` (after sorting
    by external id) while the study holds fewer gold pairs than
    round(gold_share * R / (1 - gold_share)) (halves up), R being its regular pairs at that
    moment; so gold / (gold + regular) lands on gold_share as closely as whole pairs allow,
    capped by the ranked prompts available. gold_share = 1 takes every ranked prompt.

    When a regular pair for the same answers and turn exists, that pair is marked gold (keeping
    its source) instead of creating a duplicate, which the unique constraint forbids; marking
    lowers R by one. Pairs already gold are counted as already present. `progress` is told how
    many of the new gold pairs are written. Locks the study row.
    """
    if kind not in GOLD_KINDS:
        raise PairsGenerationError(
            f"Unknown gold kind {kind!r}; choose one of {', '.join(GOLD_KINDS)}."
        )
    _study_lock(study)
    prompts, answers_by_prompt = _answers_by_prompt(study)
    existing = _existing_pairs(study)
    gold = sum(1 for pair in existing.values() if pair.is_gold)
    # Contrast items are shown like any regular pair, so they count towards the gold share too.
    contrast_items = Pair.objects.filter(study=study, source=Pair.Source.CONTRAST).count()
    regular = len(existing) - gold + contrast_items

    candidates: list[tuple[Prompt, Answer, Answer, int]] = []
    already_present = 0
    skipped_answers = 0
    for prompt in prompts:
        usable, skipped = _usable(answers_by_prompt.get(prompt.pk, []))
        skipped_answers += skipped
        chosen = gold_pair_choose(answers=usable, kind=kind)
        if chosen is None:
            continue
        better, worse = chosen
        turn = max(1, prompt.turn_count)
        found = existing.get((*canonical_key(better.pk, worse.pk), turn))
        if found is not None and found.is_gold:
            already_present += 1
            continue
        candidates.append((prompt, better, worse, turn))

    random.Random(seed).shuffle(candidates)
    to_create: list[Pair] = []
    to_mark: list[Pair] = []
    for prompt, better, worse, turn in candidates:
        target = gold_target(gold_share=study.gold_share, regular=regular)
        if target is not None and gold >= target:
            break
        answer_a_id, answer_b_id = canonical_key(better.pk, worse.pk)
        side = "A" if better.pk == answer_a_id else "B"
        found = existing.get((answer_a_id, answer_b_id, turn))
        if found is not None:
            found.is_gold, found.gold_side, found.gold_kind = True, side, kind
            to_mark.append(found)
            regular -= 1
        else:
            to_create.append(
                Pair(
                    study=study,
                    prompt=prompt,
                    answer_a_id=answer_a_id,
                    answer_b_id=answer_b_id,
                    turn=turn,
                    source=Pair.Source.GOLD,
                    is_gold=True,
                    gold_side=side,
                    gold_kind=kind,
                )
            )
        gold += 1
    Pair.objects.bulk_update(to_mark, ["is_gold", "gold_side", "gold_kind"], batch_size=1000)
    _pairs_write(to_create, progress)
    return PairsResult(
        created=len(to_create),
        already_present=already_present,
        skipped_answers=skipped_answers,
        marked_gold=len(to_mark),
    )


@transaction.atomic
def contrast_items_create(*, study: Study, seed: int = 0) -> PairsResult:
    """Create the items of the study's contrast set for `seed`: two per contrast pair.

    A contrast pair (I_A, r_A; I_B, r_B) gives the item "I_A with r_A and r_B" and the item
    "I_B with r_A and r_B", each at turn 1 with the two answers in canonical order like every
    pair, so the shown order is counterbalanced by the claim as for any item and nothing tells a
    worker it is a contrast item. Items already there are counted, not duplicated; a pair whose
    answer has since been flagged for an identity leak gets no items and is counted. Locks the
    study row for the transaction.
    """
    _study_lock(study)
    contrast_set = ContrastSet.objects.filter(study=study, seed=seed).first()
    if contrast_set is None:
        raise PairsGenerationError(
            f"Study {study.slug} has no contrast set for seed {seed}; build one first with "
            f"`manage.py build_contrast_set --study {study.slug} --seed {seed}`."
        )
    existing = set(
        Pair.objects.filter(study=study, source=Pair.Source.CONTRAST)
        .order_by()
        .values_list("prompt_id", "answer_a_id", "answer_b_id")
    )
    to_create: list[Pair] = []
    already_present = skipped = 0
    for contrast in contrast_set.pairs.select_related("answer_a", "answer_b").order_by("pk"):
        if not (contrast.answer_a.usable_in_pairs and contrast.answer_b.usable_in_pairs):
            skipped += 1
            continue
        answer_a_id, answer_b_id = canonical_key(contrast.answer_a_id, contrast.answer_b_id)
        for prompt_id in (contrast.prompt_a_id, contrast.prompt_b_id):
            if (prompt_id, answer_a_id, answer_b_id) in existing:
                already_present += 1
                continue
            to_create.append(
                Pair(
                    study=study,
                    prompt_id=prompt_id,
                    answer_a_id=answer_a_id,
                    answer_b_id=answer_b_id,
                    turn=1,
                    source=Pair.Source.CONTRAST,
                    contrast=contrast,
                )
            )
    Pair.objects.bulk_create(to_create, batch_size=1000)
    return PairsResult(
        created=len(to_create), already_present=already_present, skipped_answers=skipped
    )
