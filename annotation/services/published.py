"""Import the human judgments a benchmark published (MT-Bench's expert votes, for one).

Such files carry labels, not texts: a vote names a prompt, two systems, a turn, a rater and a
winner. The caller reads and checks its source and hands over plain records; this module writes
what belongs to annotation: the study (created if missing), its prompts, systems, empty answers
and pairs, one imported worker per rater, and the study's imported judgments at the given turns,
which it replaces.

Locking: one transaction with the study row locked (`SELECT ... FOR UPDATE`), so two imports into
one study run one after the other. Called inside a wider transaction (the MT-Bench import also
writes judge verdicts), it becomes part of that one: both commit or neither does.

Canonical order: a pair is stored with the smaller answer id as A. Systems are created in name
order and answers per prompt in system order, so on a first import A is also the system whose name
sorts first.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from django.db import transaction

from annotation.models import Answer, HumanJudgment, Pair, Preference, Prompt, Study, System, Worker
from core.errors import ApplicationError

Winner = Literal["first", "second", "tie"]
"""Which of a pair's two systems, in the order the source lists them, a rater preferred."""


class PublishedImportError(ApplicationError, ValueError):
    """Records that contradict each other or the study; the message names the record."""


@dataclass(frozen=True)
class PublishedPrompt:
    external_id: str
    category: str
    turns: list[str]


@dataclass(frozen=True)
class PublishedPair:
    """Two systems' answers to one prompt, compared at one turn, in the source's order."""

    prompt: str
    first: str
    second: str
    turn: int


@dataclass(frozen=True)
class PublishedVote:
    pair: PublishedPair
    rater: str
    winner: Winner


def _answers(answer_ids: dict[tuple[str, str], int], pair: PublishedPair) -> tuple[int, int]:
    """The ids of the pair's two answers, in the source's order."""
    return answer_ids[(pair.prompt, pair.first)], answer_ids[(pair.prompt, pair.second)]


def _canonical_key(
    answer_ids: dict[tuple[str, str], int], pair: PublishedPair
) -> tuple[int, int, int]:
    """(answer A, answer B, turn) of the stored pair: the smaller answer id is A."""
    first, second = _answers(answer_ids, pair)
    return (min(first, second), max(first, second), pair.turn)


@dataclass(frozen=True)
class PublishedPairs:
    """The stored pairs of an import, to find a source pair's row and a winner's canonical side."""

    answer_ids: dict[tuple[str, str], int]
    pair_ids: dict[tuple[int, int, int], int]

    def _answers(self, pair: PublishedPair) -> tuple[int, int]:
        return self.answer_ids[(pair.prompt, pair.first)], self.answer_ids[
            (pair.prompt, pair.second)
        ]

    def pair_id(self, pair: PublishedPair) -> int:
        """The id of the stored pair, whichever order the source lists its systems in."""
        first, second = self._answers(pair)
        return self.pair_ids[(min(first, second), max(first, second), pair.turn)]

    def preference(self, pair: PublishedPair, winner: Winner) -> Preference:
        """The winner in the pair's canonical terms (A is the answer with the smaller id)."""
        if winner == "tie":
            return Preference.TIE
        first, second = self._answers(pair)
        winner_id, loser_id = (first, second) if winner == "first" else (second, first)
        return Preference.A if winner_id < loser_id else Preference.B


@dataclass(frozen=True)
class PublishedJudgmentsResult:
    study: Study
    pairs: PublishedPairs
    prompt_count: int
    system_count: int
    pair_count: int
    judgment_count: int


def _check(
    *,
    prompts: Sequence[PublishedPrompt],
    pairs: Collection[PublishedPair],
    votes: Sequence[PublishedVote],
    turns: Collection[int],
) -> None:
    by_id: dict[str, PublishedPrompt] = {}
    for prompt in prompts:
        if prompt.external_id in by_id:
            raise PublishedImportError(f"prompt {prompt.external_id!r} is given twice")
        by_id[prompt.external_id] = prompt
    for pair in [*pairs, *(v.pair for v in votes)]:
        if pair.prompt not in by_id:
            raise PublishedImportError(f"{pair}: prompt {pair.prompt!r} is not among the prompts")
        if pair.first == pair.second:
            raise PublishedImportError(f"{pair}: a system cannot be compared with itself")
        if not 1 <= pair.turn <= len(by_id[pair.prompt].turns):
            raise PublishedImportError(f"{pair}: turn {pair.turn} is not a turn of the prompt")
    for vote in votes:
        if vote.pair.turn not in turns:
            raise PublishedImportError(
                f"{vote}: turn {vote.pair.turn} is not among the turns imported {sorted(turns)}"
            )


def published_judgments_import(
    *,
    study_slug: str,
    study_name: str,
    notes: str,
    prompts: Sequence[PublishedPrompt],
    pairs: Collection[PublishedPair],
    votes: Sequence[PublishedVote],
    turns: Collection[int],
) -> PublishedJudgmentsResult:
    """Store published votes as imported judgments of the study `study_slug`.

    `pairs` lists every pair to store (those the votes name are added); `notes` is a paragraph the
    study's notes keep (added once). A new study is created closed, without the Likert form.
    Prompts, systems, answers, pairs and raters are matched by their keys, so importing the same
    records again leaves the same rows; the study's imported judgments at `turns` are replaced.
    Raise PublishedImportError, before anything is written, for records that contradict each other.
    """
    _check(prompts=prompts, pairs=pairs, votes=votes, turns=turns)
    with transaction.atomic():
        study, created = Study.objects.select_for_update().get_or_create(
            slug=study_slug,
            defaults={
                "name": study_name,
                "status": Study.Status.CLOSED,
                "form_likert": False,
                "notes": notes,
            },
        )
        if not created and notes not in study.notes:
            study.notes = f"{study.notes}\n\n{notes}".strip()
        study.categories = sorted(set(study.categories or []) | {p.category for p in prompts})
        study.save(update_fields=["notes", "categories", "updated_at"])
        prompt_rows = _prompts_store(study=study, prompts=prompts)
        all_pairs = set(pairs) | {v.pair for v in votes}
        system_names = sorted({p.first for p in all_pairs} | {p.second for p in all_pairs})
        stored = _pairs_store(
            study=study, prompt_rows=prompt_rows, system_names=system_names, pairs=all_pairs
        )
        workers = _raters_store(study=study, raters={v.rater for v in votes})
        HumanJudgment.objects.filter(study=study, is_imported=True, pair__turn__in=turns).delete()
        judgments = HumanJudgment.objects.bulk_create(
            [
                HumanJudgment(
                    study=study,
                    pair_id=stored.pair_id(v.pair),
                    worker_id=workers[v.rater],
                    is_imported=True,
                    a_left=None,
                    likert_shown=None,
                    likert=None,
                    preference=stored.preference(v.pair, v.winner),
                )
                for v in votes
            ],
            batch_size=2000,
        )
    return PublishedJudgmentsResult(
        study=study,
        pairs=stored,
        prompt_count=len(prompts),
        system_count=len(system_names),
        pair_count=len({stored.pair_id(p) for p in all_pairs}),
        judgment_count=len(judgments),
    )


def _prompts_store(*, study: Study, prompts: Sequence[PublishedPrompt]) -> dict[str, Prompt]:
    """Create the missing prompts (matched by external id) and update changed ones."""
    existing = set(Prompt.objects.filter(study=study).values_list("external_id", flat=True))
    Prompt.objects.bulk_create(
        [
            Prompt(study=study, external_id=p.external_id, category=p.category, turns=p.turns)
            for p in prompts
            if p.external_id not in existing
        ]
    )
    rows = {p.external_id: p for p in Prompt.objects.filter(study=study)}
    for p in prompts:
        row = rows[p.external_id]
        if row.category != p.category or row.turns != p.turns:
            row.category, row.turns = p.category, p.turns
            row.save(update_fields=["category", "turns"])
    return rows


def _prompt_order(key: tuple[str, str]) -> tuple[int, str, str]:
    # Numeric external ids in number order (MT-Bench's 81 before 101), then any others.
    prompt, system = key
    return (int(prompt) if prompt.isdigit() else 0, prompt, system)


def _pairs_store(
    *,
    study: Study,
    prompt_rows: dict[str, Prompt],
    system_names: list[str],
    pairs: set[PublishedPair],
) -> PublishedPairs:
    """Create the missing systems (no version), empty answers and pairs, in canonical order."""
    existing_systems = set(
        System.objects.filter(study=study, version="").values_list("name", flat=True)
    )
    System.objects.bulk_create(
        [System(study=study, name=name) for name in system_names if name not in existing_systems]
    )
    systems = {s.name: s for s in System.objects.filter(study=study, version="")}

    needed = sorted(
        {(p.prompt, name) for p in pairs for name in (p.first, p.second)}, key=_prompt_order
    )
    answer_qs = Answer.objects.filter(prompt__study=study).values_list(
        "id", "prompt__external_id", "system__name"
    )
    answer_ids = {(q, m): pk for pk, q, m in answer_qs}
    Answer.objects.bulk_create(
        [
            Answer(prompt=prompt_rows[q], system=systems[m], turns=[])
            for q, m in needed
            if (q, m) not in answer_ids
        ]
    )
    answer_ids = {(q, m): pk for pk, q, m in answer_qs.all()}

    prompt_of_answer = {pk: prompt_rows[q] for (q, _m), pk in answer_ids.items()}
    wanted = set()
    for pair in pairs:
        first, second = (
            answer_ids[(pair.prompt, pair.first)],
            answer_ids[(pair.prompt, pair.second)],
        )
        wanted.add((min(first, second), max(first, second), pair.turn))
    pair_qs = Pair.objects.filter(study=study).values_list(
        "id", "answer_a_id", "answer_b_id", "turn"
    )
    pair_ids = {(a, b, t): pk for pk, a, b, t in pair_qs}
    Pair.objects.bulk_create(
        [
            Pair(
                study=study,
                prompt=prompt_of_answer[a],
                answer_a_id=a,
                answer_b_id=b,
                turn=t,
                source=Pair.Source.IMPORTED,
            )
            for a, b, t in sorted(wanted)
            if (a, b, t) not in pair_ids
        ]
    )
    pair_ids = {(a, b, t): pk for pk, a, b, t in pair_qs.all()}
    return PublishedPairs(answer_ids=answer_ids, pair_ids=pair_ids)


def _raters_store(*, study: Study, raters: set[str]) -> dict[str, int]:
    """One imported worker per rater id (done: they never ask for work); return their ids."""
    imported = Worker.objects.filter(study=study, panel=Worker.Panel.IMPORTED)
    existing = set(imported.values_list("external_id", flat=True))
    Worker.objects.bulk_create(
        [
            Worker(study=study, panel=Worker.Panel.IMPORTED, external_id=r, state=Worker.State.DONE)
            for r in sorted(raters)
            if r not in existing
        ]
    )
    return dict(imported.values_list("external_id", "id"))
