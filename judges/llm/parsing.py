"""Strict parsers for judge replies, and the mapping from the order shown to canonical A/B.

Every parser is a pure function of the reply text. A reply that does not follow the format gives
a ParseResult with `parse_error` set and the raw text kept; a parser never guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from core.conventions import SEVEN_VALUE_KEYS, likert_collapse, likert_mirror
from judges.models import OutputFormat

Side = Literal["first", "second", "tie"]
Order = Literal["ab", "ba"]
_SIDE: dict[str, Side] = {"A": "first", "tie": "tie", "B": "second"}

# Openings of replies in which a model declines to judge. Matched at the start of the reply only,
# so an explanation that mentions "I cannot tell them apart" after a valid score still parses.
_REFUSAL = re.compile(
    r"^\s*(i\s*(?:'m|am)\s+(?:sorry|unable|not able)|i\s+(?:can(?:'|no)t|cannot|won'?t|will not)"
    r"|sorry\b|as an ai\b|i apologi[sz]e|unfortunately,? i)",
    re.IGNORECASE,
)
_INTEGER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_VERDICT_TOKEN = re.compile(r"\[\[([A-Za-z]+)\]\]")


@dataclass(frozen=True)
class ParseResult:
    """What a reply said, in the terms of the order shown."""

    raw: str
    likert_shown: int | None = None
    score_first: float | None = None
    score_second: float | None = None
    winner_shown: Side | None = None
    verdict_label: str = ""
    values: tuple[str, ...] = field(default=())
    grade: float | None = None
    parse_error: str = ""
    refusal: bool = False

    @property
    def ok(self) -> bool:
        return not self.parse_error


@dataclass(frozen=True)
class CanonicalVerdict:
    """A parsed reply in canonical A/B terms, as stored on a JudgeCall."""

    likert_shown: int | None
    likert: int | None
    preference: str
    score_a: float | None
    score_b: float | None
    verdict_label: str
    values: tuple[str, ...]


def _failure(raw: str, message: str) -> ParseResult:
    if _REFUSAL.match(raw):
        return ParseResult(raw=raw, parse_error=f"refusal: {message}", refusal=True)
    return ParseResult(raw=raw, parse_error=message)


def _first_line(raw: str) -> str:
    for line in raw.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _whole_number_alone(raw: str, *, what: str, high: int) -> int | ParseResult:
    """The whole number 1-`high` written alone on the first non-empty line, or the failure.

    The number may be wrapped in emphasis or followed by a full stop ("**3**", "3."), and a
    grade out of ten may say so ("7/10"), which changes nothing about what was said; anything
    else on the line is an error.
    """
    if not raw.strip():
        return ParseResult(raw=raw, parse_error="empty reply")
    line = _first_line(raw)
    bare = line.strip("*_` ").rstrip(".").strip()
    text = line
    out_of = re.fullmatch(rf"([-+]?\d+(?:\.\d+)?)\s*/\s*{high}", bare) if high == 10 else None
    if out_of is not None:
        bare = text = out_of.group(1)
    numbers = _INTEGER.findall(text)
    if not numbers:
        return _failure(raw, f"no {what} on the first line")
    if len(numbers) > 1:
        return _failure(raw, f"more than one number on the first line: {line[:80]!r}")
    if bare != numbers[0]:
        return _failure(raw, f"the first line holds more than the {what}: {line[:80]!r}")
    if not re.fullmatch(r"[-+]?\d+", bare):
        return _failure(raw, f"{what} is not a whole number: {bare!r}")
    value = int(bare)
    if not 1 <= value <= high:
        return _failure(raw, f"{what} {value} is outside 1-{high}")
    return value


def likert_parse(raw: str) -> ParseResult:
    """Read a Likert score 1-8 written alone on the first non-empty line."""
    value = _whole_number_alone(raw, what="score", high=8)
    if isinstance(value, ParseResult):
        return value
    return ParseResult(raw=raw, likert_shown=value, winner_shown=likert_side(value))


def two_scores_parse(raw: str) -> ParseResult:
    """Read two grades 1-10, first reply's then second's, alone on the first line."""
    if not raw.strip():
        return ParseResult(raw=raw, parse_error="empty reply")
    line = _first_line(raw)
    match = re.fullmatch(r"\**\s*(\d+(?:\.\d+)?)\s*[ ,/]\s*(\d+(?:\.\d+)?)\s*\**\.?", line)
    if match is None:
        numbers = _INTEGER.findall(line)
        if len(numbers) == 1:
            return _failure(raw, f"only one grade on the first line: {line[:80]!r}")
        if len(numbers) > 2:
            return _failure(raw, f"more than two numbers on the first line: {line[:80]!r}")
        return _failure(raw, f"the first line is not two grades: {line[:80]!r}")
    first, second = float(match.group(1)), float(match.group(2))
    for grade in (first, second):
        if not 1 <= grade <= 10:
            return _failure(raw, f"grade {grade:g} is outside 1-10")
    winner: Side = "tie" if first == second else ("first" if first > second else "second")
    return ParseResult(raw=raw, score_first=first, score_second=second, winner_shown=winner)


def verdict_parse(raw: str) -> ParseResult:
    """Read exactly one verdict token: [[A]] (first), [[B]] (second) or [[C]] (tie)."""
    if not raw.strip():
        return ParseResult(raw=raw, parse_error="empty reply")
    tokens = {token.upper() for token in _VERDICT_TOKEN.findall(raw)}
    if not tokens:
        return _failure(raw, "no verdict token [[A]], [[B]] or [[C]]")
    if len(tokens) > 1:
        return _failure(raw, f"conflicting verdict tokens: {', '.join(sorted(tokens))}")
    token = tokens.pop()
    sides: dict[str, Side] = {"A": "first", "B": "second", "C": "tie"}
    if token not in sides:
        return _failure(raw, f"unknown verdict token [[{token}]]")
    return ParseResult(raw=raw, winner_shown=sides[token], verdict_label=f"[[{token}]]")


def values_parse(raw: str) -> ParseResult:
    """Read FIRST or SECOND on the first line and known value keys on the second."""
    if not raw.strip():
        return ParseResult(raw=raw, parse_error="empty reply")
    lines = [line.strip() for line in raw.strip().splitlines() if line.strip()]
    head = lines[0].strip("*_` .").upper()
    if head not in ("FIRST", "SECOND"):
        return _failure(raw, f"the first line is not FIRST or SECOND: {lines[0][:80]!r}")
    if len(lines) < 2:
        return _failure(raw, "no values on the second line")
    keys = [key.strip().strip("*_`.").lower() for key in lines[1].split(",")]
    keys = [key for key in keys if key]
    unknown = [key for key in keys if key not in SEVEN_VALUE_KEYS]
    if not keys:
        return _failure(raw, "no values on the second line")
    if unknown:
        return _failure(raw, f"unknown values: {', '.join(unknown)}")
    side: Side = "first" if head == "FIRST" else "second"
    return ParseResult(
        raw=raw, winner_shown=side, values=tuple(dict.fromkeys(keys)), verdict_label=head
    )


def grade_parse(raw: str) -> ParseResult:
    """Read one grade 1-10, a whole number alone on the first line ("7", "**7**", "7/10")."""
    value = _whole_number_alone(raw, what="grade", high=10)
    if isinstance(value, ParseResult):
        return value
    return ParseResult(raw=raw, grade=float(value))


PARSERS = {
    OutputFormat.LIKERT: likert_parse,
    OutputFormat.TWO_SCORES: two_scores_parse,
    OutputFormat.VERDICT: verdict_parse,
    OutputFormat.VALUES: values_parse,
    OutputFormat.GRADE: grade_parse,
}


def reply_parse(raw: str, output_format: OutputFormat | str) -> ParseResult:
    """Parse a reply with the parser of the template's output format."""
    return PARSERS[OutputFormat(output_format)](raw)


def likert_side(value: int) -> Side:
    """Collapse a Likert score with ties: 1-3 first, 4-5 tie, 6-8 second (core.conventions)."""
    return _SIDE[likert_collapse(value)]


def likert_canonical(shown: int, order: Order) -> int:
    """The canonical score: as shown when A came first, 9 - shown when B came first."""
    return shown if order == "ab" else likert_mirror(shown)


def side_canonical(side: Side, order: Order) -> str:
    """Map a side of the order shown to the canonical preference 'A', 'B' or 'tie'."""
    if side == "tie":
        return "tie"
    a_first = order == "ab"
    return "A" if (side == "first") == a_first else "B"


def verdict_canonical(result: ParseResult, order: Order) -> CanonicalVerdict:
    """Turn a parsed reply into canonical A/B terms; `result` must have parsed."""
    if not result.ok or result.winner_shown is None:
        raise ValueError("only a parsed reply has a canonical verdict")
    likert = None if result.likert_shown is None else likert_canonical(result.likert_shown, order)
    first, second = result.score_first, result.score_second
    score_a, score_b = (first, second) if order == "ab" else (second, first)
    return CanonicalVerdict(
        likert_shown=result.likert_shown,
        likert=likert,
        preference=side_canonical(result.winner_shown, order),
        score_a=score_a,
        score_b=score_b,
        verdict_label=result.verdict_label,
        values=result.values,
    )
