"""Import MT-Bench's published human and GPT-4 pairwise labels into a study.

Source: the `lmsys/mt_bench_human_judgments` data set (Zheng et al. 2023, "Judging LLM-as-a-Judge
with MT-Bench and Chatbot Arena"). The files carry labels only: answers are imported with empty
turns and the study's notes say so.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from annotation.models import (
    Answer,
    HumanJudgment,
    Pair,
    Preference,
    Prompt,
    Study,
    System,
    Worker,
)
from judges.models import Judge, JudgeCall, JudgeRun

MTBENCH_JUDGE_NAME = "gpt-4 pair, imported"
MTBENCH_TURNS = (1, 2)
MTBENCH_NOTES = (
    "Imported from MT-Bench's published judgments (lmsys/mt_bench_human_judgments, Zheng et al. "
    "2023, CC-BY-4.0). The files carry labels only: the answer texts are not included, so every "
    "answer here is empty. Human votes are A / B / tie preferences without Likert scores or the "
    "order shown; raters expert_* are the paper's experts, author_* its authors. GPT-4's verdicts "
    "come from judging each pair in both orders; an inconsistent pair of verdicts is a tie."
)
_WINNERS = frozenset({"model_a", "model_b", "tie", "tie (inconsistent)", "tie (bothbad)"})


class MTBenchImportError(ValueError):
    """A file or row that cannot be imported; the message names the file and line."""


@dataclass(frozen=True)
class MTBenchImportResult:
    study: Study
    turns: tuple[int, ...]
    prompts: int
    systems: int
    pairs: int
    human_judgments: int
    judge_calls: int
    run: JudgeRun


@dataclass(frozen=True)
class _Question:
    question_id: str
    category: str
    turns: list[str]


@dataclass(frozen=True)
class _Vote:
    """One label: the question, the two models as written, the turn, the winner and who voted."""

    question_id: str
    model_a: str
    model_b: str
    turn: int
    winner: str
    judge: str
    record: dict[str, Any]
    where: str


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise MTBenchImportError(f"{path}: cannot be read ({exc.strerror})") from exc
    with handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise MTBenchImportError(f"{path}, line {line_no}: not JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise MTBenchImportError(f"{path}, line {line_no}: expected a JSON object")
            yield line_no, row


def _field(row: dict[str, Any], name: str, where: str) -> Any:
    if name not in row:
        raise MTBenchImportError(f"{where}: missing field {name!r}")
    return row[name]


def _read_questions(path: Path) -> dict[str, _Question]:
    questions: dict[str, _Question] = {}
    for line_no, row in _read_jsonl(path):
        where = f"{path}, line {line_no}"
        question_id = str(_field(row, "question_id", where))
        category = _field(row, "category", where)
        turns = _field(row, "turns", where)
        if not isinstance(category, str) or not category:
            raise MTBenchImportError(f"{where}: category must be a non-empty string")
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns) or not turns:
            raise MTBenchImportError(f"{where}: turns must be a non-empty list of strings")
        if question_id in questions:
            raise MTBenchImportError(f"{where}: question_id {question_id} appears twice")
        questions[question_id] = _Question(question_id, category, turns)
    if not questions:
        raise MTBenchImportError(f"{path}: no questions")
    return questions


def _read_votes(path: Path, questions: dict[str, _Question], turns: Collection[int]) -> list[_Vote]:
    votes: list[_Vote] = []
    for line_no, row in _read_jsonl(path):
        where = f"{path}, line {line_no}"
        question_id = str(_field(row, "question_id", where))
        model_a, model_b = _field(row, "model_a", where), _field(row, "model_b", where)
        turn, winner, judge = (
            _field(row, "turn", where),
            _field(row, "winner", where),
            _field(row, "judge", where),
        )
        if question_id not in questions:
            raise MTBenchImportError(f"{where}: question_id {question_id} is not in the questions")
        if not (isinstance(model_a, str) and isinstance(model_b, str) and model_a and model_b):
            raise MTBenchImportError(f"{where}: model_a and model_b must be non-empty strings")
        if model_a == model_b:
            raise MTBenchImportError(f"{where}: model_a and model_b are both {model_a!r}")
        if not isinstance(turn, int) or not 1 <= turn <= len(questions[question_id].turns):
            raise MTBenchImportError(f"{where}: turn {turn!r} is not a turn of the question")
        if winner not in _WINNERS:
            raise MTBenchImportError(f"{where}: winner {winner!r} is not one of {sorted(_WINNERS)}")
        if not isinstance(judge, str) or not judge:
            raise MTBenchImportError(f"{where}: judge must be a non-empty string")
        if turn in turns:
            votes.append(_Vote(question_id, model_a, model_b, turn, winner, judge, row, where))
    return votes


def _canonical_preference(vote: _Vote, answer_ids: dict[tuple[str, str], int]) -> str:
    """Map the vote's winner onto the pair's canonical order (answer A has the smaller id)."""
    if "tie" in vote.winner:
        return Preference.TIE
    winner_model = vote.model_a if vote.winner == "model_a" else vote.model_b
    loser_model = vote.model_b if vote.winner == "model_a" else vote.model_a
    winner_id = answer_ids[(vote.question_id, winner_model)]
    loser_id = answer_ids[(vote.question_id, loser_model)]
    return Preference.A if winner_id < loser_id else Preference.B


def mtbench_import(
    *,
    study_slug: str,
    questions_path: Path,
    human_path: Path,
    gpt4_path: Path,
    turns: Collection[int] = MTBENCH_TURNS,
) -> MTBenchImportResult:
    """Load MT-Bench's questions, human votes and GPT-4 pair verdicts at `turns` into a study.

    Creates the study if it does not exist. Everything is read and checked before anything is
    written; the writes are one transaction. Re-importing the same files leaves the same rows:
    prompts, systems, answers, pairs and raters are matched by their keys, and the study's
    imported human judgments and imported GPT-4 calls at the given turns are replaced.
    """
    selected = tuple(sorted(set(turns)))
    if not selected or any(t not in MTBENCH_TURNS for t in selected):
        raise MTBenchImportError(f"turns must be among {MTBENCH_TURNS}, not {list(turns)}")
    questions = _read_questions(questions_path)
    human_votes = _read_votes(human_path, questions, selected)
    gpt4_votes = _read_votes(gpt4_path, questions, selected)
    seen: set[tuple[str, frozenset[str], int]] = set()
    for vote in gpt4_votes:
        if vote.judge != "gpt4_pair":
            raise MTBenchImportError(f"{vote.where}: judge {vote.judge!r} is not gpt4_pair")
        key = (vote.question_id, frozenset((vote.model_a, vote.model_b)), vote.turn)
        if key in seen:
            raise MTBenchImportError(f"{vote.where}: a second GPT-4 verdict on the same pair")
        seen.add(key)
    if not human_votes and not gpt4_votes:
        raise MTBenchImportError(f"no votes at turns {list(selected)} in {human_path}, {gpt4_path}")

    with transaction.atomic():
        return _write(
            study_slug=study_slug,
            questions=questions,
            human_votes=human_votes,
            gpt4_votes=gpt4_votes,
            turns=selected,
        )


def _write(
    *,
    study_slug: str,
    questions: dict[str, _Question],
    human_votes: list[_Vote],
    gpt4_votes: list[_Vote],
    turns: tuple[int, ...],
) -> MTBenchImportResult:
    study, created = Study.objects.select_for_update().get_or_create(
        slug=study_slug,
        defaults={
            "name": "MT-Bench human judgments",
            "status": Study.Status.CLOSED,
            "form_likert": False,
            "notes": MTBENCH_NOTES,
        },
    )
    if not created and MTBENCH_NOTES not in study.notes:
        study.notes = f"{study.notes}\n\n{MTBENCH_NOTES}".strip()
    categories = sorted({q.category for q in questions.values()})
    study.categories = sorted(set(study.categories or []) | set(categories))
    study.save(update_fields=["notes", "categories", "updated_at"])

    # Prompts: matched by external id (the question id).
    existing_prompts = {p.external_id: p for p in Prompt.objects.filter(study=study)}
    Prompt.objects.bulk_create(
        [
            Prompt(study=study, external_id=q.question_id, category=q.category, turns=q.turns)
            for q in questions.values()
            if q.question_id not in existing_prompts
        ]
    )
    prompts = {p.external_id: p for p in Prompt.objects.filter(study=study)}
    for q in questions.values():
        prompt = prompts[q.question_id]
        if prompt.category != q.category or prompt.turns != q.turns:
            prompt.category, prompt.turns = q.category, q.turns
            prompt.save(update_fields=["category", "turns"])

    # Systems in name order, then answers per prompt in system order, so that on a first import
    # the canonical pair order (smaller answer id first) is also the alphabetical one.
    all_votes = human_votes + gpt4_votes
    model_names = sorted({v.model_a for v in all_votes} | {v.model_b for v in all_votes})
    existing_systems = set(
        System.objects.filter(study=study, version="").values_list("name", flat=True)
    )
    System.objects.bulk_create(
        [System(study=study, name=name) for name in model_names if name not in existing_systems]
    )
    systems = {s.name: s for s in System.objects.filter(study=study, version="")}

    needed_answers = sorted(
        {(v.question_id, m) for v in all_votes for m in (v.model_a, v.model_b)},
        key=lambda qm: (int(qm[0]) if qm[0].isdigit() else 0, qm[0], qm[1]),
    )
    answer_qs = Answer.objects.filter(prompt__study=study).values_list(
        "id", "prompt__external_id", "system__name"
    )
    answer_ids = {(q, m): pk for pk, q, m in answer_qs}
    Answer.objects.bulk_create(
        [
            Answer(prompt=prompts[q], system=systems[m], turns=[])
            for q, m in needed_answers
            if (q, m) not in answer_ids
        ]
    )
    answer_ids = {(q, m): pk for pk, q, m in answer_qs.all()}

    # Pairs: one per (question, unordered model pair, turn), in canonical order.
    def pair_key(vote: _Vote) -> tuple[int, int, int]:
        first = answer_ids[(vote.question_id, vote.model_a)]
        second = answer_ids[(vote.question_id, vote.model_b)]
        return (min(first, second), max(first, second), vote.turn)

    prompt_of_answer = {pk: prompts[q] for (q, _m), pk in answer_ids.items()}
    wanted_pairs = {pair_key(v) for v in all_votes}
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
            for a, b, t in sorted(wanted_pairs)
            if (a, b, t) not in pair_ids
        ]
    )
    pair_ids = {(a, b, t): pk for pk, a, b, t in pair_qs.all()}

    # Raters: one imported worker per judge id; expert_* and author_* stay distinct ids.
    rater_ids = sorted({v.judge for v in human_votes})
    existing_workers = set(
        Worker.objects.filter(study=study, panel=Worker.Panel.IMPORTED).values_list(
            "external_id", flat=True
        )
    )
    Worker.objects.bulk_create(
        [
            Worker(study=study, panel=Worker.Panel.IMPORTED, external_id=r, state=Worker.State.DONE)
            for r in rater_ids
            if r not in existing_workers
        ]
    )
    workers = dict(
        Worker.objects.filter(study=study, panel=Worker.Panel.IMPORTED).values_list(
            "external_id", "id"
        )
    )

    # Human votes: replace this study's imported judgments at these turns.
    HumanJudgment.objects.filter(study=study, is_imported=True, pair__turn__in=turns).delete()
    judgments = HumanJudgment.objects.bulk_create(
        [
            HumanJudgment(
                study=study,
                pair_id=pair_ids[pair_key(v)],
                worker_id=workers[v.judge],
                is_imported=True,
                a_left=None,
                likert_shown=None,
                likert=None,
                preference=_canonical_preference(v, answer_ids),
            )
            for v in human_votes
        ],
        batch_size=2000,
    )

    # GPT-4's verdicts: one imported judge, one imported run per study, one call per pair.
    judge, _ = Judge.objects.get_or_create(
        name=MTBENCH_JUDGE_NAME,
        defaults={
            "kind": Judge.Kind.IMPORTED,
            "model_name": "gpt-4",
            "order_policy": Judge.OrderPolicy.BOTH,
        },
    )
    run = (
        JudgeRun.objects.filter(judge=judge, study=study, status=JudgeRun.Status.IMPORTED)
        .order_by("pk")
        .first()
    )
    if run is None:
        run = JudgeRun.objects.create(
            judge=judge,
            study=study,
            status=JudgeRun.Status.IMPORTED,
            note="GPT-4 pair verdicts published with MT-Bench; each pair judged in both orders.",
        )
    JudgeCall.objects.filter(run=run, pair__turn__in=turns).delete()
    calls = JudgeCall.objects.bulk_create(
        [
            JudgeCall(
                run=run,
                pair_id=pair_ids[pair_key(v)],
                order=JudgeCall.Order.BOTH,
                status=JudgeCall.Status.DONE,
                request=v.record,
                raw_output=json.dumps(v.record, sort_keys=True),
                preference=_canonical_preference(v, answer_ids),
                verdict_label=v.winner,
                model_version_reported="gpt-4",
            )
            for v in gpt4_votes
        ],
        batch_size=2000,
    )
    run.pairs.add(*sorted({pair_ids[pair_key(v)] for v in gpt4_votes}))

    return MTBenchImportResult(
        study=study,
        turns=turns,
        prompts=len(questions),
        systems=len(model_names),
        pairs=len(wanted_pairs),
        human_judgments=len(judgments),
        judge_calls=len(calls),
        run=run,
    )
