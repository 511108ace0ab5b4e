"""Import MT-Bench's published human and GPT-4 pairwise labels into a study.

Source: the `lmsys/mt_bench_human_judgments` data set (Zheng et al. 2023, "Judging LLM-as-a-Judge
with MT-Bench and Chatbot Arena"). The files carry labels only: answers are imported with empty
turns and the study's notes say so.

This module reads and checks the files; it writes nothing itself. The people's votes go through
annotation.services.published and GPT-4's verdicts through judges.services.published, both in one
transaction. It lives in leaderboard because it is the one app that may call both: annotation
knows no judges, and the MT-Bench format is a benchmark's, not a judge's.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from annotation.models import Study
from annotation.services.published import (
    PublishedImportError,
    PublishedPair,
    PublishedPrompt,
    PublishedVote,
    Winner,
    published_judgments_import,
)
from core.errors import ApplicationError
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.published import (
    PublishedVerdict,
    PublishedVerdictsError,
    published_verdicts_import,
)

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


class MTBenchImportError(ApplicationError, ValueError):
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


def _read_questions(path: Path) -> dict[str, PublishedPrompt]:
    questions: dict[str, PublishedPrompt] = {}
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
        questions[question_id] = PublishedPrompt(question_id, category, turns)
    if not questions:
        raise MTBenchImportError(f"{path}: no questions")
    return questions


def _read_votes(
    path: Path, questions: dict[str, PublishedPrompt], turns: Collection[int]
) -> list[_Vote]:
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


def _winner(vote: _Vote) -> Winner:
    """The vote's winner as one of the two systems in the order the file lists them, or a tie."""
    if "tie" in vote.winner:
        return "tie"
    return "first" if vote.winner == "model_a" else "second"


def _pair(vote: _Vote) -> PublishedPair:
    return PublishedPair(
        prompt=vote.question_id, first=vote.model_a, second=vote.model_b, turn=vote.turn
    )


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

    try:
        return _store(
            study_slug=study_slug,
            questions=questions,
            human_votes=human_votes,
            gpt4_votes=gpt4_votes,
            turns=selected,
        )
    except (PublishedImportError, PublishedVerdictsError) as exc:
        raise MTBenchImportError(f"{study_slug}: {exc}; nothing was written") from exc


def _store(
    *,
    study_slug: str,
    questions: dict[str, PublishedPrompt],
    human_votes: list[_Vote],
    gpt4_votes: list[_Vote],
    turns: tuple[int, ...],
) -> MTBenchImportResult:
    # One transaction around both apps' writes: the labels of people and of GPT-4 land together
    # or not at all. Each service locks the study row and opens a savepoint inside this one.
    with transaction.atomic():
        people = published_judgments_import(
            study_slug=study_slug,
            study_name="MT-Bench human judgments",
            notes=MTBENCH_NOTES,
            prompts=list(questions.values()),
            pairs=[_pair(v) for v in gpt4_votes],
            votes=[
                PublishedVote(pair=_pair(v), rater=v.judge, winner=_winner(v)) for v in human_votes
            ],
            turns=turns,
        )
        stored = people.pairs
        gpt4 = published_verdicts_import(
            study=people.study,
            judge_name=MTBENCH_JUDGE_NAME,
            model_name="gpt-4",
            order_policy=Judge.OrderPolicy.BOTH,
            call_order=JudgeCall.Order.BOTH,
            run_note=(
                "GPT-4 pair verdicts published with MT-Bench; each pair judged in both orders."
            ),
            turns=turns,
            verdicts=[
                PublishedVerdict(
                    pair_id=stored.pair_id(_pair(v)),
                    preference=stored.preference(_pair(v), _winner(v)),
                    label=v.winner,
                    record=v.record,
                )
                for v in gpt4_votes
            ],
        )
    return MTBenchImportResult(
        study=people.study,
        turns=turns,
        prompts=people.prompt_count,
        systems=people.system_count,
        pairs=people.pair_count,
        human_judgments=people.judgment_count,
        judge_calls=gpt4.call_count,
        run=gpt4.run,
    )
