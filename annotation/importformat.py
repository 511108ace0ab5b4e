"""Read an import file (JSONL or CSV, UTF-8) as a stream of checked records.

The format is described in docs/import-format.md. Parsing knows nothing of the database: it
yields systems and prompts with their answers, and records every problem (line, field, message)
it finds on the way. Pure: no Django imports.
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

from core.errors import ApplicationError
from core.jsondepth import json_depth

MAX_REPORTED_PROBLEMS = 20
FORMATS: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
# Report progress at most this often (in bytes), so a progress bar costs nothing.
PROGRESS_STEP = 1 << 20
# The lengths of the model fields they fill (tests check that they agree).
EXTERNAL_ID_MAX = 200
CATEGORY_MAX = 100
SYSTEM_NAME_MAX = 200
SYSTEM_VERSION_MAX = 100
# What PostgreSQL can store: a 4-byte integer column, and JSON nested a sane depth (deeper input
# is refused before it reaches the parser's recursion or the database's stack).
INTEGER_MAX = 2**31 - 1
MAX_JSON_DEPTH = 64
INTEGER_FIELDS = frozenset({"rank", "upvotes"})


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


class StudyImportError(ApplicationError):
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
class SystemRow:
    """A system declared in the file."""

    line: int
    name: str
    version: str
    decoding: dict[str, Any]


@dataclass(frozen=True)
class AnswerRow:
    """One system's answer to a prompt, one text per prompt turn."""

    line: int
    field: str  # where the answer's fields live: "answers[2]" in JSONL, "" in CSV
    system: str
    version: str
    turns: list[str]
    rank: int | None
    upvotes: int | None

    def at(self, name: str) -> str:
        return f"{self.field}.{name}" if self.field else name

    def where(self, name: str, other: AnswerRow) -> str:
        """Point at this answer's field from another answer of the same prompt."""
        return self.at(name) if self.line == other.line else f"at line {self.line}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.system, self.version)


@dataclass
class PromptRow:
    """A prompt and its answers, checked against each other."""

    line: int
    external_id: str
    category: str
    turns: list[str]
    answers: list[AnswerRow] = field(default_factory=list)
    # A reference answer for reference-guided judges, one text per turn (JSONL `reference`).
    reference: list[str] | None = None


class Problems:
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


def source_name(source: Source) -> str:
    """The file's name: the path, or an open file's `name` (an upload's original name)."""
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    return str(getattr(source, "name", "") or "")


@contextmanager
def opened(source: Source) -> Iterator[BinaryReadable]:
    """Open a path for binary reading, or rewind an open file, for one pass over it."""
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as handle:
            yield handle
    else:
        source.seek(0)
        yield source


def source_size(source: Source) -> int:
    """The file's size in bytes, for progress."""
    if isinstance(source, str | os.PathLike):
        return os.path.getsize(source)
    source.seek(0, os.SEEK_END)
    size = source.tell()
    source.seek(0)
    return size


class _EncodingError(ApplicationError):
    pass


def _decoded_lines(
    handle: BinaryReadable,
    problems: Problems,
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

    def __init__(self, obj: dict[str, Any], line: int, prefix: str, problems: Problems) -> None:
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


def _check_answers(prompt: PromptRow, problems: Problems) -> None:
    """Within one prompt: one answer per system, distinct ranks."""
    systems: dict[tuple[str, str], AnswerRow] = {}
    ranks: dict[int, AnswerRow] = {}
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


def _text_problem(value: str) -> str:
    if "\x00" in value:
        return "contains a NUL character (\\u0000), which cannot be stored; remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains a lone surrogate (\\u{ord(value[exc.start]):04x}), which is not text; "
            "fix the escape"
        )
    return ""


def text_unstorable(obj: Any, path: str = "") -> tuple[str, str] | None:
    """Find the first text (key or value) in parsed JSON that PostgreSQL cannot store, or an
    integer beyond its columns: return (field path, message), or None when all is storable."""
    stack: list[tuple[str, Any]] = [(path, obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            message = _text_problem(value)
            if message:
                return where, message
        elif isinstance(value, int) and not isinstance(value, bool):
            # Ranks and upvotes fill integer columns; numbers inside `decoding` stay JSON.
            if where.rsplit(".", 1)[-1] in INTEGER_FIELDS and abs(value) > INTEGER_MAX:
                return where, f"{value} is out of range (at most {INTEGER_MAX})"
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                name = f"{where}.{key}" if where else str(key)
                message = _text_problem(str(key))
                if message:
                    return name, message
                stack.append((name, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def _jsonl_records(
    lines: Iterator[tuple[int, str]], problems: Problems
) -> Iterator[SystemRow | PromptRow]:
    for number, text in lines:
        if not text.strip():
            continue
        depth = json_depth(text)
        if depth > MAX_JSON_DEPTH:
            problems.add(number, "", f"nested {depth} levels deep; at most {MAX_JSON_DEPTH}")
            continue
        try:
            obj = json.loads(text.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            problems.add(number, "", f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        unstorable = text_unstorable(obj)
        if unstorable is not None:
            problems.add(number, *unstorable)
            continue
        if not isinstance(obj, dict):
            problems.add(number, "", f"expected a JSON object, got {_json_type(obj)}")
            continue
        record = _Fields(obj, number, "", problems)
        kind = obj.get("type", "prompt")
        if kind == "system":
            name = record.string("name", required=True, max_length=SYSTEM_NAME_MAX)
            version = record.string("version", required=False, max_length=SYSTEM_VERSION_MAX)
            decoding = record.mapping("decoding")
            if name and not name.strip():
                record.fail("name", "must not be empty")
            if record.ok:
                yield SystemRow(number, name, version, decoding)
            continue
        if kind != "prompt":
            record.fail("type", f"expected 'prompt' or 'system', got {json.dumps(kind)}")
            continue
        prompt = _jsonl_prompt(record)
        if prompt is not None:
            yield prompt


def _jsonl_prompt(record: _Fields) -> PromptRow | None:
    number, problems = record.line, record.problems
    external_id = record.string(
        "id", required=True, max_length=EXTERNAL_ID_MAX, allow_int=True, allow_empty=False
    )
    category = record.string("category", required=False, max_length=CATEGORY_MAX)
    turns = record.string_list("turns", allow_empty_items=False)
    raw_answers = record.obj.get("answers", [])
    if not isinstance(raw_answers, list):
        record.fail("answers", f"expected a list of answers, got {_json_type(raw_answers)}")
        raw_answers = []
    prompt = PromptRow(number, external_id, category, turns)
    prompt.reference = _jsonl_reference(record, len(turns))
    for index, raw in enumerate(raw_answers):
        prefix = f"answers[{index}]"
        if not isinstance(raw, dict):
            record.fail(prefix, f"expected an object, got {_json_type(raw)}")
            continue
        item = _Fields(raw, number, prefix, problems)
        system = item.string("system", required=True, max_length=SYSTEM_NAME_MAX)
        if "system" in raw and isinstance(raw["system"], str) and not system.strip():
            item.fail("system", "must not be empty")
        version = item.string("version", required=False, max_length=SYSTEM_VERSION_MAX)
        answer_turns = _jsonl_answer_turns(item, len(turns))
        rank = item.integer("rank", minimum=1)
        upvotes = item.integer("upvotes")
        if item.ok:
            prompt.answers.append(
                AnswerRow(number, prefix, system, version, answer_turns, rank, upvotes)
            )
        else:
            record.ok = False
    if not record.ok:
        return None
    _check_answers(prompt, problems)
    return prompt


def _jsonl_reference(record: _Fields, prompt_turns: int) -> list[str] | None:
    """The prompt's reference answer: a text for a single-turn prompt, or one text per turn."""
    value = record.obj.get("reference")
    if value is None:
        return None
    if isinstance(value, str):
        if prompt_turns > 1:
            record.fail(
                "reference",
                f"the prompt has {prompt_turns} turns; give a list of {prompt_turns} texts",
            )
            return None
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        record.fail("reference", f"expected a string or a list of strings, got {_json_type(value)}")
        return None
    if prompt_turns and len(value) != prompt_turns:
        record.fail(
            "reference",
            f"has {len(value)} turn(s) but the prompt has {prompt_turns}; give one each",
        )
        return None
    if any(not item.strip() for item in value):
        record.fail("reference", "must not be empty")
        return None
    return value


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


def _csv_records(lines: Iterator[tuple[int, str]], problems: Problems) -> Iterator[PromptRow]:
    """One pass over the CSV: a prompt row per run of lines with the same prompt_id, and a
    problem per bad line or cell (a prompt's rows must repeat its fields identically)."""
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
    current: PromptRow | None = None
    current_fields: dict[str, str] = {}
    last_end = line_numbers[0]
    for row in reader:
        start, last_end = last_end + 1, line_numbers[0]
        blank = not any(cell.strip() for cell in row)
        if blank or not _csv_row_sound(start, row, header, problems):
            continue
        values = {name: row[position] for name, position in index.items()}
        prompt_fields = {"category": values.get("category", "")} | {
            f"turn_{n}": values[f"turn_{n}"] for n in range(1, turn_count + 1)
        }
        external_id = values["prompt_id"].strip()
        if current is not None and external_id == current.external_id:
            _csv_same_prompt_check(start, current, current_fields, prompt_fields, problems)
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


def _csv_row_sound(line: int, row: list[str], header: list[str], problems: Problems) -> bool:
    """Whether a CSV line has the header's fields and no bad text; its first problem if not."""
    if len(row) != len(header):
        problems.add(line, "", f"has {len(row)} fields but the header has {len(header)}")
        return False
    bad = next(
        ((name, message) for name, cell in zip(header, row, strict=True)
         if (message := _text_problem(cell))),
        None,
    )  # fmt: skip
    if bad is not None:
        problems.add(line, *bad)
        return False
    return True


def _csv_same_prompt_check(
    line: int,
    current: PromptRow,
    current_fields: dict[str, str],
    prompt_fields: dict[str, str],
    problems: Problems,
) -> None:
    """A later row of the same prompt must repeat its fields; the first that differs is a
    problem."""
    for name, value in prompt_fields.items():
        if value != current_fields[name]:
            problems.add(
                line,
                name,
                f"differs from line {current.line} for prompt {current.external_id}; "
                "repeat the prompt's fields identically on each of its rows",
            )
            return


def _csv_columns(header: list[str], problems: Problems) -> tuple[int, list[str]] | None:
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
    problems: Problems,
) -> PromptRow | None:
    ok = True
    if not external_id:
        problems.add(line, "prompt_id", "missing")
        ok = False
    elif len(external_id) > EXTERNAL_ID_MAX:
        problems.add(line, "prompt_id", f"longer than {EXTERNAL_ID_MAX} characters")
        ok = False
    category = prompt_fields["category"].strip()
    if len(category) > CATEGORY_MAX:
        problems.add(line, "category", f"longer than {CATEGORY_MAX} characters")
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
    return PromptRow(line, external_id, category, turns) if ok else None


def _csv_answer(
    line: int,
    values: dict[str, str],
    prompt_turns: int,
    answer_columns: list[str],
    problems: Problems,
) -> AnswerRow | None:
    before = problems.total
    system = values["system"].strip()
    version = values.get("system_version", "").strip()
    if not system:
        problems.add(line, "system", "missing")
    elif len(system) > SYSTEM_NAME_MAX:
        problems.add(line, "system", f"longer than {SYSTEM_NAME_MAX} characters")
    if len(version) > SYSTEM_VERSION_MAX:
        problems.add(line, "system_version", f"longer than {SYSTEM_VERSION_MAX} characters")
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
            number = int(raw)
        except ValueError:
            problems.add(line, name, f"expected a whole number, got '{raw}'")
            continue
        if minimum is not None and number < minimum:
            problems.add(line, name, f"must be at least {minimum}, got {raw}")
        elif abs(number) > INTEGER_MAX:
            problems.add(line, name, f"{raw} is out of range (at most {INTEGER_MAX})")
        numbers[name] = number
    if problems.total > before:
        return None
    return AnswerRow(line, "", system, version, turns, numbers["rank"], numbers["upvotes"])


def records(
    handle: BinaryReadable,
    fmt: str,
    problems: Problems,
    report: Callable[[int], None],
) -> Iterator[SystemRow | PromptRow]:
    """Yield the file's well-formed systems and prompts, recording each problem in `problems`.

    `fmt` is "jsonl" or "csv"; `report` is called with the bytes read so far. A byte that is not
    UTF-8 ends the pass, since nothing after it can be trusted to be split into lines correctly.
    """
    lines = _decoded_lines(handle, problems, report)
    try:
        if fmt == "csv":
            yield from _csv_records(lines, problems)
        else:
            yield from _jsonl_records(lines, problems)
    except _EncodingError:
        return
