"""Import MT-Bench's published human and GPT-4 pairwise labels into a study."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaderboard.services.mtbench_import import (
    MTBENCH_TURNS,
    MTBenchImportError,
    mtbench_import,
)


def parse_turns(values: list[str] | None) -> tuple[int, ...]:
    """Read the repeated --turn options; none given, or 'all', means every turn."""
    if not values or "all" in values:
        return MTBENCH_TURNS
    turns: set[int] = set()
    for value in values:
        if not value.isdigit() or int(value) not in MTBENCH_TURNS:
            raise CommandError(f"--turn {value!r}: expected one of {list(MTBENCH_TURNS)} or 'all'")
        turns.add(int(value))
    return tuple(sorted(turns))


class Command(BaseCommand):
    help = (
        "Import MT-Bench's questions, expert and author votes and GPT-4 pair verdicts into a "
        "study (created if missing). --turn may be given more than once, or as 'all' (default)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--questions", required=True, type=Path, help="mt_bench_question.jsonl")
        parser.add_argument("--human", required=True, type=Path, help="human.jsonl")
        parser.add_argument("--gpt4", required=True, type=Path, help="gpt4_pair.jsonl")
        parser.add_argument(
            "--turn", action="append", metavar="N|all", help="1, 2 or all; may be repeated"
        )
        parser.add_argument("--study", required=True, help="slug of the study to import into")

    def handle(self, *args: Any, **options: Any) -> None:
        turns = parse_turns(options["turn"])
        try:
            result = mtbench_import(
                study_slug=options["study"],
                questions_path=options["questions"],
                human_path=options["human"],
                gpt4_path=options["gpt4"],
                turns=turns,
            )
        except MTBenchImportError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Imported into {result.study.slug} at turns {list(result.turns)}: "
            f"{result.prompts} prompts, {result.systems} systems, {result.pairs} pairs, "
            f"{result.human_judgments} human judgments, {result.judge_calls} GPT-4 verdicts."
        )
