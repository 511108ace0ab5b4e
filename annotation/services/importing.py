"""Import a study's systems, prompts and answers from a JSONL or CSV file.

The file format is described in docs/import-format.md. An import reads the file twice, as a
stream, never holding the whole file in memory:

1. *validate*: parse every record and collect problems (line, field, message); read-only.
2. *write*: inside ONE `transaction.atomic()`, with the study row locked, read the file again and
   create or update rows in batches. Any problem found here (a prompt that already has pairs
   would change) raises, and the transaction rolls back: an import writes all or nothing.

A dry run does both passes but never writes, so it reports exactly what the import would do.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.db import transaction
from django.db.models import Exists, OuterRef

from annotation.leakscan import scan_answer
from annotation.models import Answer, Pair, Prompt, Study, System

MAX_REPORTED_PROBLEMS = 20
BATCH_SIZE = 500
FORMATS: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
# Report progress at most this often (in bytes), so a progress bar costs nothing.
PROGRESS_STEP = 1 << 20

_EXTERNAL_ID_MAX = Prompt._meta.get_field("external_id").max_length or 200
_CATEGORY_MAX = Prompt._meta.get_field("category").max_length or 100
_SYSTEM_NAME_MAX = System._meta.get_field("name").max_length or 200
_SYSTEM_VERSION_MAX = System._meta.get_field("version").max_length or 100

ImportProgress = Callable[[str, int, int], None]
"""Called as progress(phase, bytes_done, bytes_total); phase is "validate", then "write" (or
"compare" in a dry run)."""


class BinaryReadable(Protocol):
    """A file opened for binary reading that can be rewound (a Django upload qualifies)."""

    def readline(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def tell(self) -> int: ...


@dataclass(frozen=True)
class ImportProblem:
    """One thing wrong with the file: where (line, field) and what."""

    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        return self.format()

    def format(self, path: str = "") -> str:
        """Render as `path:line: field: message` (`line N: ...` without a path), leaving out the
        parts that are unknown."""
        if path:
            where = f"{path}:{self.line}" if self.line else path
        else:
            where = f"line {self.line}" if self.line else ""
        parts = [part for part in (where, self.field, self.message) if part]
        return ": ".join(parts)


class StudyImportError(Exception):
    """The file cannot be imported; nothing was written. Holds the first problems and a count."""

    def __init__(self, problems: Sequence[ImportProblem], total: int | None = None) -> None:
        self.problems: list[ImportProblem] = list(problems)[:MAX_REPORTED_PROBLEMS]
        self.total: int = max(total if total is not None else len(problems), len(self.problems))
        super().__init__("\n".join(self.lines()))

    @property
    def more(self) -> int:
        """How many problems were found beyond those kept."""
        return self.total - len(self.problems)

    def lines(self, path: str = "") -> list[str]:
        """One line per kept problem, then "and N more problems" when some were left out."""
        rendered = [problem.format(path) for problem in self.problems]
        if self.more:
            rendered.append(f"and {self.more} more problem{'s' if self.more != 1 else ''}")
        return rendered


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


@dataclass(frozen=True)
class _SystemRow:
    line: int
    name: str
    version: str
    decoding: dict[str, Any]


@dataclass(frozen=True)
class _AnswerRow:
    line: int
    field: str  # where the answer's fields live: "answers[2]" in JSONL, "" in CSV
    system: str
    version: str
    turns: list[str]
    rank: int | None
    upvotes: int | None

    def at(self, name: str) -> str:
        return f"{self.field}.{name}" if self.field else name

    def where(self, name: str, other: _AnswerRow) -> str:
        """Point at this answer's field from another answer of the same prompt."""
        return self.at(name) if self.line == other.line else f"at line {self.line}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.system, self.version)


@dataclass
class _PromptRow:
    line: int
    external_id: str
    category: str
    turns: list[str]
    answers: list[_AnswerRow] = field(default_factory=list)


class _Problems:
    """Collects problems, keeping the first few and counting the rest."""

    def __init__(self) -> None:
        self.kept: list[ImportProblem] = []
        self.total = 0

    def add(self, line: int | None, field: str, message: str) -> None:
        self.total += 1
        if len(self.kept) < MAX_REPORTED_PROBLEMS:
            self.kept.append(ImportProblem(line=line, field=field, message=message))

    def __bool__(self) -> bool:
        return self.total > 0

    def raise_if_any(self) -> None:
        if self.total:
            ordered = sorted(self.kept, key=lambda problem: problem.line or 0)
            raise StudyImportError(ordered, self.total)


Source = str | os.PathLike[str] | BinaryReadable


def import_format_for(name: str, fmt: str | None = None) -> str:
    """Return "jsonl" or "csv" for an explicit format or a file name; raise for anything else."""
    if fmt is not None:
        if fmt not in set(FORMATS.values()):
            raise StudyImportError([ImportProblem(None, "", f"unsupported format '{fmt}'")])
        return fmt
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        shown = f"'{suffix}'" if suffix else "without an extension"
        raise StudyImportError(
            [ImportProblem(None, "", f"unsupported file type {shown}; use .jsonl, .ndjson or .csv")]
        )
    return FORMATS[suffix]


def _source_name(source: Source) -> str:
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    return str(getattr(source, "name", "") or "")


@contextmanager
def _opened(source: Source) -> Iterator[BinaryReadable]:
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as handle:
            yield handle
    else:
        source.seek(0)
        yield source


def _size(source: Source) -> int:
    if isinstance(source, str | os.PathLike):
        return os.path.getsize(source)
    source.seek(0, os.SEEK_END)
    size = source.tell()
    source.seek(0)
    return size


class _EncodingError(Exception):
    pass


def _decoded_lines(
    handle: BinaryReadable,
    problems: _Problems,
    report: Callable[[int], None],
) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) for each physical line; stop at the first byte that is not
    UTF-8, after recording where it is."""
    offset = 0
    reported = 0
    for number, raw in enumerate(iter(handle.readline, b""), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.add(
                number,
                "",
                f"the file is not UTF-8: byte 0x{raw[exc.start]:02x} at byte offset "
                f"{offset + exc.start} cannot be decoded; save the file as UTF-8",
            )
            raise _EncodingError from exc
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        offset += len(raw)
        if offset - reported >= PROGRESS_STEP:
            report(offset)
            reported = offset
        yield number, text
    report(offset)


_JSON_TYPES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


class _Fields:
    """Typed access to one JSON object's fields, recording a problem for each bad one."""

    def __init__(self, obj: dict[str, Any], line: int, prefix: str, problems: _Problems) -> None:
        self.obj = obj
        self.line = line
        self.prefix = prefix
        self.problems = problems
        self.ok = True

    def name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def fail(self, key: str, message: str) -> None:
        self.ok = False
        self.problems.add(self.line, self.name(key), message)

    def string(
        self,
        key: str,
        *,
        required: bool,
        max_length: int | None = None,
        allow_int: bool = False,
        allow_empty: bool = True,
    ) -> str:
        if key not in self.obj:
            if required:
                self.fail(key, "missing")
            return ""
        value = self.obj[key]
        if allow_int and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {_json_type(value)}")
            return ""
        if not allow_empty and not value.strip():
            self.fail(key, "must not be empty")
        if max_length is not None and len(value) > max_length:
            self.fail(key, f"longer than {max_length} characters")
        return value

    def integer(self, key: str, *, minimum: int | None = None) -> int | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(key, f"expected a whole number, got {_json_type(value)}")
            return None
        if minimum is not None and value < minimum:
            self.fail(key, f"must be at least {minimum}, got {value}")
            return None
        return value

    def string_list(self, key: str, *, allow_empty_items: bool) -> list[str]:
        if key not in self.obj:
            self.fail(key, "missing")
            return []
        value = self.obj[key]
        if not isinstance(value, list):
            self.fail(key, f"expected a list of strings, got {_json_type(value)}")
            return []
        if not value:
            self.fail(key, "must hold at least one turn")
            return []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{key}[{index}]", f"expected a string, got {_json_type(item)}")
            elif not allow_empty_items and not item.strip():
                self.fail(f"{key}[{index}]", "must not be empty")
        return value

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.obj.get(key, {})
        if not isinstance(value, dict):
            self.fail(key, f"expected an object, got {_json_type(value)}")
            return {}
        return value


def _check_answers(prompt: _PromptRow, problems: _Problems) -> None:
    """Within one prompt: one answer per system, distinct ranks."""
    systems: dict[tuple[str, str], _AnswerRow] = {}
    ranks: dict[int, _AnswerRow] = {}
    for answer in prompt.answers:
        earlier = systems.setdefault(answer.key, answer)
        if earlier is not answer:
            problems.add(
                answer.line,
                answer.at("system"),
                f"system '{answer.system}' version '{answer.version}' answers prompt "
                f"{prompt.external_id} twice (also {earlier.where('system', answer)})",
            )
        if answer.rank is not None:
            earlier = ranks.setdefault(answer.rank, answer)
            if earlier is not answer:
                problems.add(
                    answer.line,
                    answer.at("rank"),
                    f"rank {answer.rank} given twice in prompt {prompt.external_id} "
                    f"(also {earlier.where('rank', answer)})",
                )


def _jsonl_records(
    lines: Iterator[tuple[int, str]], problems: _Problems
) -> Iterator[_SystemRow | _PromptRow]:
    for number, text in lines:
        if not text.strip():
            continue
        try:
            obj = json.loads(text.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            problems.add(number, "", f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            problems.add(number, "", f"expected a JSON object, got {_json_type(obj)}")
            continue
        record = _Fields(obj, number, "", problems)
        kind = obj.get("type", "prompt")
        if kind == "system":
            name = record.string("name", required=True, max_length=_SYSTEM_NAME_MAX)
            version = record.string("version", required=False, max_length=_SYSTEM_VERSION_MAX)
            decoding = record.mapping("decoding")
            if name and not name.strip():
                record.fail("name", "must not be empty")
            if record.ok:
                yield _SystemRow(number, name, version, decoding)
            continue
        if kind != "prompt":
            record.fail("type", f"expected 'prompt' or 'system', got {json.dumps(kind)}")
            continue
        prompt = _jsonl_prompt(record)
        if prompt is not None:
            yield prompt


def _jsonl_prompt(record: _Fields) -> _PromptRow | None:
    number, problems = record.line, record.problems
    external_id = record.string(
        "id", required=True, max_length=_EXTERNAL_ID_MAX, allow_int=True, allow_empty=False
    )
    category = record.string("category", required=False, max_length=_CATEGORY_MAX)
    turns = record.string_list("turns", allow_empty_items=False)
    raw_answers = record.obj.get("answers", [])
    if not isinstance(raw_answers, list):
        record.fail("answers", f"expected a list of answers, got {_json_type(raw_answers)}")
        raw_answers = []
    prompt = _PromptRow(number, external_id, category, turns)
    for index, raw in enumerate(raw_answers):
        prefix = f"answers[{index}]"
        if not isinstance(raw, dict):
            record.fail(prefix, f"expected an object, got {_json_type(raw)}")
            continue
        item = _Fields(raw, number, prefix, problems)
        system = item.string("system", required=True, max_length=_SYSTEM_NAME_MAX)
        if "system" in raw and isinstance(raw["system"], str) and not system.strip():
            item.fail("system", "must not be empty")
        version = item.string("version", required=False, max_length=_SYSTEM_VERSION_MAX)
        answer_turns = _jsonl_answer_turns(item, len(turns))
        rank = item.integer("rank", minimum=1)
        upvotes = item.integer("upvotes")
        if item.ok:
            prompt.answers.append(
                _AnswerRow(number, prefix, system, version, answer_turns, rank, upvotes)
            )
        else:
            record.ok = False
    if not record.ok:
        return None
    _check_answers(prompt, problems)
    return prompt


def _jsonl_answer_turns(item: _Fields, prompt_turns: int) -> list[str]:
    has_text, has_turns = "text" in item.obj, "turns" in item.obj
    if has_text and has_turns:
        item.fail("text", "give either text or turns, not both")
        return []
    if not has_text and not has_turns:
        item.fail("text", "missing (give text, or turns for a multi-turn prompt)")
        return []
    if has_text:
        text = item.string("text", required=True)
        if prompt_turns > 1:
            item.fail(
                "text",
                f"the prompt has {prompt_turns} turns; give turns, a list of {prompt_turns} texts",
            )
        return [text]
    value = item.obj["turns"]
    if not isinstance(value, list) or not all(isinstance(turn, str) for turn in value):
        item.fail("turns", f"expected a list of strings, got {_json_type(value)}")
        return []
    if prompt_turns and len(value) != prompt_turns:
        item.fail(
            "turns", f"has {len(value)} turn(s) but the prompt has {prompt_turns}; give one each"
        )
    return value


_TURN_COLUMN = re.compile(r"^turn_(\d+)$")
_ANSWER_COLUMN = re.compile(r"^answer_(\d+)$")


def _numbered(header: list[str], pattern: re.Pattern[str]) -> list[int]:
    numbers = sorted(int(m.group(1)) for name in header if (m := pattern.match(name)))
    return numbers


def _csv_records(lines: Iterator[tuple[int, str]], problems: _Problems) -> Iterator[_PromptRow]:
    line_numbers: list[int] = [0]

    def texts() -> Iterator[str]:
        for number, text in lines:
            line_numbers[0] = number
            yield text

    reader = csv.reader(texts())
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        return
    columns = _csv_columns(header, problems)
    if columns is None:
        return
    turn_count, answer_columns = columns
    index = {name: position for position, name in enumerate(header)}
    current: _PromptRow | None = None
    current_fields: dict[str, str] = {}
    last_end = line_numbers[0]
    for row in reader:
        start, last_end = last_end + 1, line_numbers[0]
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            problems.add(start, "", f"has {len(row)} fields but the header has {len(header)}")
            continue
        values = {name: row[position] for name, position in index.items()}
        prompt_fields = {"category": values.get("category", "")} | {
            f"turn_{n}": values[f"turn_{n}"] for n in range(1, turn_count + 1)
        }
        external_id = values["prompt_id"].strip()
        if current is not None and external_id == current.external_id:
            for name, value in prompt_fields.items():
                if value != current_fields[name]:
                    problems.add(
                        start,
                        name,
                        f"differs from line {current.line} for prompt {external_id}; "
                        "repeat the prompt's fields identically on each of its rows",
                    )
                    break
        else:
            if current is not None:
                _check_answers(current, problems)
                yield current
            current = _csv_prompt(start, external_id, prompt_fields, turn_count, problems)
            current_fields = prompt_fields
            if current is None:
                continue
        answer = _csv_answer(start, values, len(current.turns), answer_columns, problems)
        if answer is not None:
            current.answers.append(answer)
    if current is not None:
        _check_answers(current, problems)
        yield current


def _csv_columns(header: list[str], problems: _Problems) -> tuple[int, list[str]] | None:
    """Check the header; return the number of turn columns and the answer columns."""
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        problems.add(1, "header", f"repeated column(s): {', '.join(duplicates)}")
        return None
    turns = _numbered(header, _TURN_COLUMN)
    answers = _numbered(header, _ANSWER_COLUMN)
    missing = [name for name in ("prompt_id", "turn_1", "system") if name not in header]
    if "answer" not in header and not answers:
        missing.append("answer (or answer_1, answer_2, ...)")
    if missing:
        problems.add(1, "header", f"missing column(s): {', '.join(missing)}")
        return None
    if "answer" in header and answers:
        problems.add(1, "header", "give either an answer column or answer_1, answer_2, ...")
        return None
    for numbers, stem in ((turns, "turn"), (answers, "answer")):
        if numbers and numbers != list(range(1, len(numbers) + 1)):
            problems.add(
                1, "header", f"{stem}_N columns must run 1, 2, 3, ... without gaps: {numbers}"
            )
            return None
    answer_columns = ["answer"] if "answer" in header else [f"answer_{n}" for n in answers]
    return len(turns), answer_columns


def _csv_prompt(
    line: int,
    external_id: str,
    prompt_fields: dict[str, str],
    turn_count: int,
    problems: _Problems,
) -> _PromptRow | None:
    ok = True
    if not external_id:
        problems.add(line, "prompt_id", "missing")
        ok = False
    elif len(external_id) > _EXTERNAL_ID_MAX:
        problems.add(line, "prompt_id", f"longer than {_EXTERNAL_ID_MAX} characters")
        ok = False
    category = prompt_fields["category"].strip()
    if len(category) > _CATEGORY_MAX:
        problems.add(line, "category", f"longer than {_CATEGORY_MAX} characters")
        ok = False
    turns = [prompt_fields[f"turn_{n}"] for n in range(1, turn_count + 1)]
    while turns and not turns[-1].strip():
        turns.pop()
    if not turns:
        problems.add(line, "turn_1", "missing")
        ok = False
    for number, turn in enumerate(turns, start=1):
        if not turn.strip():
            problems.add(line, f"turn_{number}", "empty while a later turn is given")
            ok = False
    return _PromptRow(line, external_id, category, turns) if ok else None


def _csv_answer(
    line: int,
    values: dict[str, str],
    prompt_turns: int,
    answer_columns: list[str],
    problems: _Problems,
) -> _AnswerRow | None:
    before = problems.total
    system = values["system"].strip()
    version = values.get("system_version", "").strip()
    if not system:
        problems.add(line, "system", "missing")
    elif len(system) > _SYSTEM_NAME_MAX:
        problems.add(line, "system", f"longer than {_SYSTEM_NAME_MAX} characters")
    if len(version) > _SYSTEM_VERSION_MAX:
        problems.add(line, "system_version", f"longer than {_SYSTEM_VERSION_MAX} characters")
    if answer_columns == ["answer"]:
        turns = [values["answer"]]
        if prompt_turns > 1:
            problems.add(
                line,
                "answer",
                f"the prompt has {prompt_turns} turns; use columns answer_1 ... "
                f"answer_{prompt_turns}",
            )
    else:
        turns = [values[name] for name in answer_columns[:prompt_turns]]
        if len(answer_columns) < prompt_turns:
            problems.add(
                line,
                f"answer_{len(answer_columns) + 1}",
                f"the prompt has {prompt_turns} turns but the file has "
                f"{len(answer_columns)} answer column(s)",
            )
        for name in answer_columns[prompt_turns:]:
            if values[name].strip():
                problems.add(line, name, f"given, but the prompt has only {prompt_turns} turn(s)")
    numbers: dict[str, int | None] = {}
    for name, minimum in (("rank", 1), ("upvotes", None)):
        raw = values.get(name, "").strip()
        numbers[name] = None
        if not raw:
            continue
        try:
            numbers[name] = int(raw)
        except ValueError:
            problems.add(line, name, f"expected a whole number, got '{raw}'")
            continue
        if minimum is not None and numbers[name] < minimum:  # type: ignore[operator]
            problems.add(line, name, f"must be at least {minimum}, got {raw}")
    if problems.total > before:
        return None
    return _AnswerRow(line, "", system, version, turns, numbers["rank"], numbers["upvotes"])


def _records(
    handle: BinaryReadable,
    fmt: str,
    problems: _Problems,
    report: Callable[[int], None],
) -> Iterator[_SystemRow | _PromptRow]:
    lines = _decoded_lines(handle, problems, report)
    try:
        if fmt == "csv":
            yield from _csv_records(lines, problems)
        else:
            yield from _jsonl_records(lines, problems)
    except _EncodingError:
        return


@dataclass
class _Plan:
    """What the validation pass learned: the systems the file declares and uses."""

    declared: dict[tuple[str, str], _SystemRow] = field(default_factory=dict)
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
    problems = _Problems()
    plan = _Plan()
    first_line: dict[str, int] = {}
    with _opened(source) as handle:
        for record in _records(handle, fmt, problems, report):
            if isinstance(record, _SystemRow):
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
        problems: _Problems,
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

    def apply(self, rows: list[_PromptRow], *, write: bool) -> None:
        existing = {
            prompt.external_id: prompt
            for prompt in Prompt.objects.filter(
                study=self.study, external_id__in=[row.external_id for row in rows]
            ).annotate(has_pairs=Exists(Pair.objects.filter(prompt=OuterRef("pk"))))
        }
        stored: dict[int, dict[int, Answer]] = {}
        for answer in Answer.objects.filter(prompt__in=list(existing.values())).only(
            "pk", "prompt_id", "system_id", "turns", "rank", "upvotes"
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
                )
                new_prompts.append(created)
                self.counts.prompts_created += 1
                for answer_row in row.answers:
                    new_answers.append(self._scanned(self._new_answer(created, answer_row)))
                continue
            self._compare(row, prompt, stored.get(prompt.pk, {}), new_answers, changed_answers)
            if prompt.category != row.category or prompt.turns != row.turns:
                prompt.category, prompt.turns = row.category, row.turns
                changed_prompts.append(prompt)
                self.counts.prompts_updated += 1
            else:
                self.counts.prompts_unchanged += 1
        if write and not self.problems:
            Prompt.objects.bulk_create(new_prompts)
            Answer.objects.bulk_create(new_answers)
            Prompt.objects.bulk_update(changed_prompts, ["category", "turns"])
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
                ],
            )

    def _new_answer(self, prompt: Prompt, row: _AnswerRow) -> Answer:
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
        row: _PromptRow,
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
            if (answer.turns, answer.rank, answer.upvotes) == (
                answer_row.turns,
                answer_row.rank,
                answer_row.upvotes,
            ):
                unchanged += 1
                continue
            if answer.turns != answer_row.turns:
                # New text: the old scan and any clearance no longer apply.
                answer.turns = answer_row.turns
                self._scanned(answer)
                answer.leak_cleared_by = None
                answer.leak_cleared_at = None
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
    fmt = import_format_for(_source_name(path_or_file), fmt)
    total = _size(path_or_file)

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
    problems = _Problems()
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
        rows: list[_PromptRow] = []
        with _opened(path_or_file) as handle:
            for record in _records(
                handle, fmt, problems, reporter("write" if write else "compare")
            ):
                if isinstance(record, _PromptRow):
                    rows.append(record)
                if len(rows) >= BATCH_SIZE:
                    batch.apply(rows, write=write)
                    rows = []
            if rows:
                batch.apply(rows, write=write)
        # Raising inside the atomic block rolls back every batch already written.
        problems.raise_if_any()
    return ImportResult(dry_run=dry_run, **counts.__dict__)
