"""Import a study's systems, prompts and answers from a JSONL or CSV file.

The file format is described in docs/import-format.md and parsed by annotation.importformat. An
import reads the file twice, as a stream, never holding the whole file in memory:

1. *validate*: parse every record and collect problems (line, field, message); read-only.
2. *write*: inside ONE `transaction.atomic()`, with the study row locked, read the file again and
   create or update rows in batches. Any problem found here (a prompt that already has pairs
   would change) raises, and the transaction rolls back: an import writes all or nothing.

A dry run does both passes but never writes, so it reports exactly what the import would do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Exists, OuterRef

from annotation.importformat import (
    AnswerRow,
    ImportProblem,
    Problems,
    PromptRow,
    Source,
    StudyImportError,
    SystemRow,
    import_format_for,
    opened,
    records,
    source_name,
    source_size,
)
from annotation.leakscan import scan_answer
from annotation.models import Answer, Pair, Prompt, Study, System

__all__ = ["ImportProblem", "ImportResult", "StudyImportError", "study_import"]

BATCH_SIZE = 500
# Prompt.reference_source of a reference answer the import file gave.
REFERENCE_IMPORTED = "imported"

ImportProgress = Callable[[str, int, int], None]
"""Called as progress(phase, bytes_done, bytes_total); phase is "validate", then "write" (or
"compare" in a dry run)."""


@dataclass(frozen=True)
class ImportResult:
    """What an import created, updated or left unchanged (or would have, for a dry run)."""

    dry_run: bool
    prompts_created: int = 0
    prompts_updated: int = 0
    prompts_unchanged: int = 0
    answers_created: int = 0
    answers_updated: int = 0
    answers_unchanged: int = 0
    systems_created: int = 0
    systems_updated: int = 0
    systems_unchanged: int = 0
    answers_flagged: int = 0


@dataclass
class _Counts:
    prompts_created: int = 0
    prompts_updated: int = 0
    prompts_unchanged: int = 0
    answers_created: int = 0
    answers_updated: int = 0
    answers_unchanged: int = 0
    systems_created: int = 0
    systems_updated: int = 0
    systems_unchanged: int = 0
    answers_flagged: int = 0


@dataclass
class _Plan:
    """What the validation pass learned: the systems the file declares and uses."""

    declared: dict[tuple[str, str], SystemRow] = field(default_factory=dict)
    used: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    prompts: int = 0


def _validate(
    *,
    study: Study,
    source: Source,
    fmt: str,
    add_systems: bool,
    report: Callable[[int], None],
) -> _Plan:
    problems = Problems()
    plan = _Plan()
    first_line: dict[str, int] = {}
    with opened(source) as handle:
        for record in records(handle, fmt, problems, report):
            if isinstance(record, SystemRow):
                key = (record.name, record.version)
                earlier = plan.declared.get(key)
                if earlier is not None and earlier.decoding != record.decoding:
                    problems.add(
                        record.line,
                        "decoding",
                        f"system '{record.name}' version '{record.version}' is declared again "
                        f"with other decoding (first at line {earlier.line})",
                    )
                plan.declared.setdefault(key, record)
                continue
            plan.prompts += 1
            if record.external_id in first_line:
                problems.add(
                    record.line,
                    "id" if fmt == "jsonl" else "prompt_id",
                    f"prompt id '{record.external_id}' already appears at line "
                    f"{first_line[record.external_id]}"
                    + ("; the rows of one prompt must be consecutive" if fmt == "csv" else ""),
                )
            else:
                first_line[record.external_id] = record.line
            for answer in record.answers:
                plan.used.setdefault(answer.key, (answer.line, answer.at("system")))
    if not problems and plan.prompts == 0:
        problems.add(None, "", "the file holds no prompts")
    if not add_systems:
        existing = set(study.systems.values_list("name", "version"))
        for (name, version), (line, where) in plan.used.items():
            if (name, version) not in plan.declared and (name, version) not in existing:
                problems.add(
                    line,
                    where,
                    f"unknown system '{name}' version '{version}'; declare it in the file, "
                    "create it in the study, or allow creating systems named in the file",
                )
    problems.raise_if_any()
    return plan


def _apply_systems(
    *, study: Study, plan: _Plan, counts: _Counts, write: bool
) -> dict[tuple[str, str], System]:
    systems = {(system.name, system.version): system for system in study.systems.all()}
    to_create: list[System] = []
    to_update: list[System] = []
    for key in sorted({*plan.declared, *plan.used}):
        declared = plan.declared.get(key)
        decoding = declared.decoding if declared is not None else {}
        system = systems.get(key)
        if system is None:
            system = System(study=study, name=key[0], version=key[1], decoding=decoding)
            systems[key] = system
            to_create.append(system)
            counts.systems_created += 1
        elif declared is not None and system.decoding != decoding:
            system.decoding = decoding
            to_update.append(system)
            counts.systems_updated += 1
        else:
            counts.systems_unchanged += 1
    if write:
        System.objects.bulk_create(to_create)
        System.objects.bulk_update(to_update, ["decoding"])
    return systems


class _Batch:
    """Compare one batch of prompts from the file with the database, then write the difference."""

    def __init__(
        self,
        *,
        study: Study,
        systems: dict[tuple[str, str], System],
        system_names: tuple[str, ...],
        counts: _Counts,
        problems: Problems,
    ) -> None:
        self.study = study
        self.systems = systems
        self.system_names = system_names
        self.counts = counts
        self.problems = problems

    def _scanned(self, answer: Answer) -> Answer:
        answer.leak_matches = scan_answer(answer.text, system_names=self.system_names)
        answer.leak_flagged = bool(answer.leak_matches)
        if answer.leak_flagged:
            self.counts.answers_flagged += 1
        return answer

    def apply(self, rows: list[PromptRow], *, write: bool) -> None:
        existing = {
            prompt.external_id: prompt
            for prompt in Prompt.objects.filter(
                study=self.study, external_id__in=[row.external_id for row in rows]
            ).annotate(has_pairs=Exists(Pair.objects.filter(prompt=OuterRef("pk"))))
        }
        stored: dict[int, dict[int, Answer]] = {}
        # Every field a changed answer is written back with (see apply), so none is deferred.
        for answer in Answer.objects.filter(prompt__in=list(existing.values())).only(
            "pk",
            "prompt_id",
            "system_id",
            "turns",
            "original_turns",
            "rank",
            "upvotes",
            "leak_matches",
            "leak_flagged",
            "leak_cleared_by",
            "leak_cleared_at",
            "leak_remedy",
            "leak_note",
        ):
            stored.setdefault(answer.prompt_id, {})[answer.system_id] = answer
        new_prompts: list[Prompt] = []
        new_answers: list[Answer] = []
        changed_prompts: list[Prompt] = []
        changed_answers: list[Answer] = []
        for row in rows:
            prompt = existing.get(row.external_id)
            if prompt is None:
                created = Prompt(
                    study=self.study,
                    external_id=row.external_id,
                    category=row.category,
                    turns=row.turns,
                    reference_turns=row.reference,
                    reference_source=REFERENCE_IMPORTED if row.reference else "",
                )
                new_prompts.append(created)
                self.counts.prompts_created += 1
                for answer_row in row.answers:
                    new_answers.append(self._scanned(self._new_answer(created, answer_row)))
                continue
            self._compare(row, prompt, stored.get(prompt.pk, {}), new_answers, changed_answers)
            referenced = self._reference(row, prompt)
            if prompt.category != row.category or prompt.turns != row.turns or referenced:
                prompt.category, prompt.turns = row.category, row.turns
                changed_prompts.append(prompt)
                self.counts.prompts_updated += 1
            else:
                self.counts.prompts_unchanged += 1
        if write and not self.problems:
            Prompt.objects.bulk_create(new_prompts)
            Answer.objects.bulk_create(new_answers)
            Prompt.objects.bulk_update(
                changed_prompts, ["category", "turns", "reference_turns", "reference_source"]
            )
            Answer.objects.bulk_update(
                changed_answers,
                [
                    "turns",
                    "rank",
                    "upvotes",
                    "leak_matches",
                    "leak_flagged",
                    "leak_cleared_by",
                    "leak_cleared_at",
                    "leak_remedy",
                    "leak_note",
                    "original_turns",
                ],
            )

    def _reference(self, row: PromptRow, prompt: Prompt) -> bool:
        """Give a stored prompt the file's reference answer; True if it is new to the prompt.

        A reference is frozen once set (judges' calls and copied grades refer to it): a file
        that gives another one is refused; a file that gives none keeps the stored one.
        """
        if row.reference is None or prompt.reference_turns == row.reference:
            return False
        if prompt.reference_turns is not None:
            self.problems.add(
                row.line,
                "reference",
                f"prompt {row.external_id} already has a reference answer "
                f"({prompt.reference_source or 'imported'}), which is frozen once set; this "
                "file gives another",
            )
            return False
        prompt.reference_turns, prompt.reference_source = row.reference, REFERENCE_IMPORTED
        return True

    def _new_answer(self, prompt: Prompt, row: AnswerRow) -> Answer:
        self.counts.answers_created += 1
        return Answer(
            prompt=prompt,
            system=self.systems[row.key],
            turns=row.turns,
            rank=row.rank,
            upvotes=row.upvotes,
        )

    def _compare(
        self,
        row: PromptRow,
        prompt: Prompt,
        stored: dict[int, Answer],
        new_answers: list[Answer],
        changed_answers: list[Answer],
    ) -> None:
        """Sort the answers of a prompt that exists into new, changed and unchanged; refuse any
        change to a prompt that already has pairs, since pairs and judgments refer to its text."""
        prompt_changed = prompt.category != row.category or prompt.turns != row.turns
        changes: list[Answer] = []
        unchanged = 0
        covered: set[int] = set()
        for answer_row in row.answers:
            system = self.systems[answer_row.key]
            answer = stored.get(system.pk) if system.pk is not None else None
            if answer is None:
                new_answers.append(self._scanned(self._new_answer(prompt, answer_row)))
                continue
            covered.add(answer.system_id)
            # An edited answer is compared by the text the file gave it.
            imported = answer.original_turns if answer.original_turns is not None else answer.turns
            if (imported, answer.rank, answer.upvotes) == (
                answer_row.turns,
                answer_row.rank,
                answer_row.upvotes,
            ):
                unchanged += 1
                continue
            if imported != answer_row.turns:
                # New text: the old scan and any review or edit no longer apply.
                answer.turns = answer_row.turns
                self._scanned(answer)
                answer.leak_cleared_by = None
                answer.leak_cleared_at = None
                answer.leak_remedy = ""
                answer.leak_note = ""
                answer.original_turns = None
            answer.rank, answer.upvotes = answer_row.rank, answer_row.upvotes
            changes.append(answer)
        if getattr(prompt, "has_pairs", False) and (prompt_changed or changes):
            self.problems.add(
                row.line,
                "",
                f"prompt {row.external_id} already has pairs; its text and answers cannot change",
            )
            return
        if len(prompt.turns) != len(row.turns) and set(stored) - covered:
            self.problems.add(
                row.line,
                "turns",
                f"prompt {row.external_id} changes its number of turns, but answers already "
                "stored for it by systems not in this file would no longer fit",
            )
            return
        changed_answers.extend(changes)
        self.counts.answers_updated += len(changes)
        self.counts.answers_unchanged += unchanged


def study_draft_get_or_create(*, slug: str) -> tuple[Study, bool]:
    """Return the study with this slug, creating a draft named after the slug if there is none."""
    return Study.objects.get_or_create(
        slug=slug, defaults={"name": slug.replace("-", " ").capitalize()}
    )


def study_import(
    *,
    study: Study,
    path_or_file: Source,
    fmt: str | None = None,
    dry_run: bool = False,
    add_systems: bool = False,
    progress: ImportProgress | None = None,
) -> ImportResult:
    """Import systems, prompts and answers into the study, all or nothing.

    `fmt` is "jsonl" or "csv" (default: from the file name's extension). With `dry_run`, check
    everything and report what would change, writing nothing. With `add_systems`, create the
    systems that answers name but the file does not declare. Raises StudyImportError listing
    the problems (line, field, message) when anything is wrong; then nothing is written.
    Takes the study row's lock (SELECT ... FOR UPDATE) for the write, so imports into one study
    run one at a time.
    """
    fmt = import_format_for(source_name(path_or_file), fmt)
    total = source_size(path_or_file)

    def reporter(phase: str) -> Callable[[int], None]:
        def report(done: int) -> None:
            if progress is not None:
                progress(phase, done, total)

        return report

    plan = _validate(
        study=study,
        source=path_or_file,
        fmt=fmt,
        add_systems=add_systems,
        report=reporter("validate"),
    )
    counts = _Counts()
    problems = Problems()
    write = not dry_run
    with transaction.atomic():
        if write:
            Study.objects.select_for_update().filter(pk=study.pk).first()
        systems = _apply_systems(study=study, plan=plan, counts=counts, write=write)
        batch = _Batch(
            study=study,
            systems=systems,
            system_names=tuple(sorted({name for name, _ in systems})),
            counts=counts,
            problems=problems,
        )
        rows: list[PromptRow] = []
        with opened(path_or_file) as handle:
            for record in records(handle, fmt, problems, reporter("write" if write else "compare")):
                if isinstance(record, PromptRow):
                    rows.append(record)
                if len(rows) >= BATCH_SIZE:
                    batch.apply(rows, write=write)
                    rows = []
            if rows:
                batch.apply(rows, write=write)
        # Raising inside the atomic block rolls back every batch already written.
        problems.raise_if_any()
    return ImportResult(dry_run=dry_run, **counts.__dict__)
