"""Training data of a PL model from a study: ranked answer lists and human pairwise judgments.

- A *ranked list* is one prompt's answers that carry a `rank` (1 = best) or, when no answer of
  the prompt has a rank, `upvotes` (more = better), AdvisorQA's format. Prompts with fewer than
  two ranked answers give no list. Two answers of one prompt with the same rank (or the same
  upvotes) are a tie that a ranking cannot express: an error naming the prompt and answers.
- A *human pair* is one person's judgment of a pair with a preference, as (better, worse,
  weight). A tie is dropped (``ties="drop"``) or counted as half a win for each side
  (``ties="half"``: two pairs of weight 0.5). With ``likert_weights`` a decided judgment weighs
  by its Likert strength: 1 or 8 weigh 1, 2 or 7 weigh 2/3, 3 or 6 weigh 1/3 (a judgment
  without a Likert score weighs 1).

Everything is split by prompt, never by answer: a prompt's lists and pairs are all on the same
side of the split (:func:`split_prompts`).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from annotation.models import Answer, HumanJudgment, Preference, Prompt, Study
from core.errors import ApplicationError

SOURCE_RANKED = "ranked"
SOURCE_HUMAN = "human"
SOURCES = (SOURCE_RANKED, SOURCE_HUMAN)
TIES_DROP = "drop"
TIES_HALF = "half"


class TrainingInputError(ApplicationError, ValueError):
    """The study's data cannot train the model as asked; the message names what and where."""


@dataclass(frozen=True)
class StudyData:
    """Texts and examples of one study, keyed by ids."""

    questions: dict[int, str]
    answers: dict[int, tuple[int, str]]  # answer id -> (prompt id, text)
    lists: tuple[tuple[int, tuple[int, ...]], ...]  # (prompt id, answer ids best first)
    pairs: tuple[tuple[int, int, int, float], ...]  # (prompt id, better, worse, weight)
    summary: dict[str, int] = field(default_factory=dict)

    def data_hash(self) -> str:
        """SHA-256 of the examples as texts' hashes, so equal data gives an equal hash."""

        def h(text: str) -> str:
            return hashlib.sha256(text.encode("utf-8")).hexdigest()

        payload = {
            "lists": [
                [h(self.questions[p]), [h(self.answers[a][1]) for a in ids]]
                for p, ids in self.lists
            ],
            "pairs": [
                [h(self.questions[p]), h(self.answers[b][1]), h(self.answers[w][1]), weight]
                for p, b, w, weight in self.pairs
            ],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def question_text(turns: Iterable[str] | None) -> str:
    """The question as the encoder reads it: the user's turns joined by blank lines."""
    return "\n\n".join(turns or [])


def ranked_lists(*, study: Study) -> dict[int, tuple[int, ...]]:
    """Each prompt's ranked answers, best first; raise TrainingInputError on a tie."""
    by_prompt: dict[int, list[tuple[int, int | None, int | None]]] = defaultdict(list)
    rows = (
        Answer.objects.filter(prompt__study=study)
        .exclude(rank__isnull=True, upvotes__isnull=True)
        .order_by("prompt_id", "pk")
        .values_list("prompt_id", "pk", "rank", "upvotes")
    )
    for prompt_id, answer_id, rank, upvotes in rows:
        by_prompt[prompt_id].append((answer_id, rank, upvotes))
    external = dict(Prompt.objects.filter(pk__in=by_prompt).values_list("pk", "external_id"))
    lists: dict[int, tuple[int, ...]] = {}
    for prompt_id, members in by_prompt.items():
        ranked = [(a, r) for a, r, _ in members if r is not None]
        if ranked:
            keyed = [(r, a) for a, r in ranked]
            what = "rank"
        else:
            keyed = [(-(u or 0), a) for a, _, u in members]
            what = "upvotes"
        keyed.sort()
        for (key_one, one), (key_two, two) in zip(keyed, keyed[1:], strict=False):
            if key_one == key_two:
                value = key_one if what == "rank" else -key_one
                raise TrainingInputError(
                    f"prompt {external[prompt_id]!r}: answers {one} and {two} share {what} "
                    f"{value}; a ranked list needs distinct ranks (fix the import, or train on "
                    "human labels only)"
                )
        if len(keyed) >= 2:
            lists[prompt_id] = tuple(a for _, a in keyed)
    return lists


def likert_strength(likert: int | None) -> float:
    """The weight of a decided Likert judgment: 1/8 -> 1, 2/7 -> 2/3, 3/6 -> 1/3."""
    if likert is None:
        return 1.0
    return (abs(likert - 4.5) - 0.5) / 3.0


def human_pairs(
    *, study: Study, ties: str = TIES_DROP, likert_weights: bool = False
) -> tuple[list[tuple[int, int, int, float]], dict[str, int]]:
    """The study's human judgments as (prompt, better, worse, weight), and counts of ties."""
    if ties not in (TIES_DROP, TIES_HALF):
        raise TrainingInputError(f"ties must be {TIES_DROP!r} or {TIES_HALF!r}, not {ties!r}")
    rows = (
        HumanJudgment.objects.filter(study=study)
        .exclude(preference="")
        .order_by("pk")
        .values_list(
            "pair__prompt_id", "pair__answer_a_id", "pair__answer_b_id", "preference", "likert"
        )
    )
    pairs: list[tuple[int, int, int, float]] = []
    counts = {"human_judgments": 0, "human_ties_dropped": 0, "human_ties_halved": 0}
    for prompt_id, a, b, preference, likert in rows:
        counts["human_judgments"] += 1
        if preference == Preference.TIE:
            if ties == TIES_DROP:
                counts["human_ties_dropped"] += 1
                continue
            counts["human_ties_halved"] += 1
            pairs += [(prompt_id, a, b, 0.5), (prompt_id, b, a, 0.5)]
            continue
        weight = likert_strength(likert) if likert_weights else 1.0
        better, worse = (a, b) if preference == Preference.A else (b, a)
        pairs.append((prompt_id, better, worse, weight))
    return pairs, counts


def study_data(
    *,
    study: Study,
    sources: Iterable[str],
    k: int | None,
    recipe: str,
    ties: str = TIES_DROP,
    likert_weights: bool = False,
) -> StudyData:
    """The study's examples for a training, checked; raise TrainingInputError naming the problem.

    Lists shorter than K are left out (and counted); K larger than every list is an error.
    """
    chosen = set(sources)
    unknown = chosen - set(SOURCES)
    if unknown or not chosen:
        raise TrainingInputError(f"sources must be some of {list(SOURCES)}; got {sorted(chosen)}")
    lists = ranked_lists(study=study) if SOURCE_RANKED in chosen else {}
    pairs, counts = (
        human_pairs(study=study, ties=ties, likert_weights=likert_weights)
        if SOURCE_HUMAN in chosen
        else ([], {})
    )
    if not lists and not pairs:
        raise TrainingInputError(
            f"study {study.slug!r} has no ranked lists (answers with a rank or upvotes) and no "
            f"human judgments with a preference among the sources {sorted(chosen)}: nothing to "
            "train on"
        )
    summary = {"lists_found": len(lists), **counts}
    if lists and k is not None:
        longest = max(len(ids) for ids in lists.values())
        if k > longest:
            raise TrainingInputError(
                f"K={k} is larger than every ranked list of study {study.slug!r} (the longest "
                f"has {longest} answers); choose K <= {longest} or 'all'"
            )
        short = [p for p, ids in lists.items() if len(ids) < k]
        summary["lists_shorter_than_k"] = len(short)
        for prompt_id in short:
            del lists[prompt_id]
    if not lists and SOURCE_RANKED in chosen and not pairs:
        raise TrainingInputError(f"study {study.slug!r} has no ranked list of K={k} answers")
    del recipe  # both recipes use the same lists; the recipe decides how they become terms
    answer_ids = {a for ids in lists.values() for a in ids} | {
        x for _, b, w, _ in pairs for x in (b, w)
    }
    answers = {
        pk: (prompt_id, "\n\n".join(turns or []))
        for pk, prompt_id, turns in Answer.objects.filter(pk__in=answer_ids).values_list(
            "pk", "prompt_id", "turns"
        )
    }
    prompt_ids = {prompt_id for prompt_id, _ in answers.values()}
    questions = {
        pk: question_text(turns)
        for pk, turns in Prompt.objects.filter(pk__in=prompt_ids).values_list("pk", "turns")
    }
    summary.update(lists=len(lists), pairs=len(pairs), prompts=len(prompt_ids))
    return StudyData(
        questions=questions,
        answers=answers,
        lists=tuple(sorted(lists.items())),
        pairs=tuple(pairs),
        summary=summary,
    )


def split_prompts(
    prompt_ids: Iterable[int], *, holdout: float, seed: int
) -> tuple[set[int], set[int]]:
    """(training, held-out) prompt ids: a seeded shuffle, the first ceil(holdout * n) held out.

    At least one prompt is held out when there are two or more and ``holdout > 0``.
    """
    if not 0 <= holdout < 1:
        raise TrainingInputError(f"the held-out share must be in [0, 1); got {holdout}")
    ordered = sorted(set(prompt_ids))
    random.Random(f"{seed}:split").shuffle(ordered)
    count = math.ceil(holdout * len(ordered)) if holdout > 0 else 0
    if holdout > 0 and len(ordered) >= 2:
        count = max(1, min(count, len(ordered) - 1))
    return set(ordered[count:]), set(ordered[:count])
