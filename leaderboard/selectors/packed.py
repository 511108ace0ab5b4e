"""The bulk read behind the report's frames: a queryset's columns as one aggregated string each.

Why it exists: the report reads millions of rows (a large study holds a million judgments and
two million judge calls). Through `values_list` each row is a Python tuple built by the database
driver, which costs seconds per million rows before any statistic starts. Here PostgreSQL
aggregates each column of the whole result into one string and the client decodes that string
at once, so the cost is a column scan on each side.

Two formats:

- :func:`frame_read` (any column, text included): the rows as one CSV text
  (``string_agg(concat_ws(',', ...), E'\\n')``) parsed by pandas. Text cells are quoted and come
  back as Python strings ("" for empty); flags come back as booleans or None.
- :func:`frame_read_coded` (numbers, booleans and values from a fixed list only): each column as
  one ``bytea`` of big-endian 64-bit integers (``string_agg(int8send(x), ''::bytea)``), fetched
  in PostgreSQL's binary format through a psycopg cursor on Django's connection
  (:func:`_fetch_binary_row`) and read by numpy as it lies (``np.frombuffer(..., ">i8")``):
  neither side turns a number into text.

The packing of :func:`frame_read_coded`: the small columns of a row (a choice, as its position
in the list plus one; a flag, 1 for false and 2 for true; a small integer, the value plus one;
0 always meaning NULL, and the radix's last digit meaning "outside the list or bound") are the
digits of one mixed-radix number, the first column the least significant digit. An id that is
never NULL may ride as the most significant digit of that same number (`top`), so that a judge
call (pair, order, label, two Likert scores) travels as 8 bytes. A NULL plain integer column
travels as -2**63 (:data:`_NULL_INT`), which no id or count is, and comes back as NaN. Decoding
is repeated ``divmod`` by the radices. Off PostgreSQL, or for an empty queryset, both readers
fall back on ``values_list`` and give the same frame.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Model, Q, QuerySet

from core.db.rows import queryset_sql

if TYPE_CHECKING:
    import pandas as pd


def frame_read(
    qs: QuerySet[Model],
    fields: Sequence[str],
    columns: Sequence[str],
    *,
    text: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> pd.DataFrame:
    """Read `fields` of the queryset into a DataFrame with `columns`.

    On PostgreSQL the database writes the rows as one CSV text (`string_agg`) that pandas parses:
    an order of magnitude faster than a Python tuple, or a COPY message, per row for millions of
    rows (the text must stay under PostgreSQL's 1 GB limit, some 30 million rows). `text`
    columns come back as strings ("" for empty), `flags` as booleans (None when NULL).
    """
    import pandas as pd

    rows = qs.order_by().values_list(*fields)
    try:
        sql, params = queryset_sql(rows)
    except EmptyResultSet:
        sql = ""
    if not sql or connection.vendor != "postgresql":
        frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
        for column in flags:
            frame[column] = frame[column].astype(object)
    else:
        aliases = [f"c{i}" for i in range(len(fields))]
        cells = [
            f"'\"' || replace(coalesce({alias}::text, ''), '\"', '\"\"') || '\"'"
            if name in text
            else f"coalesce({alias}::text, '')"
            for name, alias in zip(columns, aliases, strict=True)
        ]
        aggregate = (
            f"SELECT string_agg(concat_ws(',', {', '.join(cells)}), E'\\n') "
            f"FROM ({sql}) AS t({', '.join(aliases)})"
        )
        with connection.cursor() as cursor:
            cursor.execute(aggregate, params)
            csv_text = cursor.fetchone()[0] or ""
        # Text cells come back as Python strings already ("" for empty): no conversion.
        return _read_csv(csv_text, columns, text=text, flags=flags)
    for column in text:
        frame[column] = frame[column].fillna("").astype(str).astype(object)
    return frame


def frame_read_coded(  # noqa: C901 - hot path: one pass decodes each column kind
    qs: QuerySet[Model],
    fields: Sequence[str],
    columns: Sequence[str],
    *,
    choices: Mapping[str, Sequence[str]] | None = None,
    flags: Sequence[str] = (),
    small: Mapping[str, int] | None = None,
    top: str | None = None,
) -> pd.DataFrame:
    """Read numeric, boolean and choice fields of the queryset into a DataFrame with `columns`.

    Like :func:`frame_read`, but the database sends numbers only. A `choices` column (a text
    field whose values come from a fixed list) comes back as a pandas Categorical over those
    values (NaN for NULL), a `flags` column as booleans (None for NULL), a `small` column (an
    integer from 0 to the bound given) as a number; the other columns must be integer fields
    (ids, counts) and come back as int64, or float64 with NaN when some are NULL. A value outside
    its list or bound raises ValueError naming the column.

    On PostgreSQL each column travels as one binary string of big-endian 64-bit integers
    (``string_agg(int8send(...))``, fetched in binary format), which numpy reads as it is: the
    database turns no value into text and the client parses none. The choice, flag and small
    columns of a row are packed into one of those integers, each a digit of a mixed-radix number
    (0 for NULL); a NULL plain integer is sent as -2**63. `top` names one plain column that is
    never NULL nor negative (an id), sent as the most significant digit of that same integer, so
    that a row may travel as one number; NULL or a negative value there raises ValueError, and a
    value too large for the integer (above 2**63 over the product of the other digits' radices,
    some 10**15 for the report's reads) makes PostgreSQL refuse the query. A string stays under
    PostgreSQL's 1 GB limit up to some 130 million rows.
    """
    import pandas as pd

    choices = choices or {}
    small = small or {}
    rows = qs.order_by().values_list(*fields)
    try:
        sql, params = queryset_sql(rows)
    except EmptyResultSet:
        sql = ""
    if sql and connection.vendor == "postgresql":
        aliases = dict(zip(columns, (f"c{i}" for i in range(len(fields))), strict=True))
        packed = [c for c in columns if c in choices or c in flags or c in small]
        on_top = top if packed and top is not None else None
        plain = [c for c in columns if c not in packed and c != on_top]
        digits, radices = [], []
        for name in packed:
            alias = aliases[name]
            if name in choices:
                whens = " ".join(
                    f"WHEN {alias} = {_sql_literal(v)} THEN {i + 1}"
                    for i, v in enumerate(choices[name])
                )
                radix = len(choices[name]) + 2
                digits.append(f"CASE WHEN {alias} IS NULL THEN 0 {whens} ELSE {radix - 1} END")
            elif name in flags:
                radix = 3
                digits.append(f"CASE WHEN {alias} IS NULL THEN 0 WHEN {alias} THEN 2 ELSE 1 END")
            else:
                radix = small[name] + 3
                digits.append(
                    f"CASE WHEN {alias} IS NULL THEN 0 WHEN {alias} BETWEEN 0 AND "
                    f"{small[name]} THEN {alias} + 1 ELSE {radix - 1} END"
                )
            radices.append(radix)
        multipliers = [math.prod(radices[:i]) for i in range(len(radices))]
        if math.prod(radices) >= 2**62:
            raise ValueError("too many packed columns for one 64-bit number")
        cells = [f"coalesce({aliases[name]}, {_NULL_INT_SQL})" for name in plain]
        if packed:
            terms = [f"({d})::bigint * {m}" for d, m in zip(digits, multipliers, strict=True)]
            if on_top is not None:
                terms.append(f"coalesce({aliases[on_top]}, -1)::bigint * {math.prod(radices)}")
            cells.append(" + ".join(terms))
        aggregate = (
            "SELECT "
            + ", ".join(f"string_agg(int8send({cell}), ''::bytea)" for cell in cells)
            + f" FROM ({sql}) AS t({', '.join(aliases.values())})"
        )
        numbers = [
            np.frombuffer(value or b"", dtype=">i8").astype(np.int64)
            for value in _fetch_binary_row(aggregate, params)
        ]
        raw = pd.DataFrame(
            {
                name: np.where(values == _NULL_INT, np.nan, values)
                if (values == _NULL_INT).any()
                else values
                for name, values in zip(plain, numbers[: len(plain)], strict=True)
            },
            index=pd.RangeIndex(len(numbers[0])),
        )
        rest = numbers[-1] if packed else None
        decoded: dict[str, Any] = {}
        for name, radix in zip(packed, radices, strict=True):
            assert rest is not None
            rest, digit = np.divmod(rest, radix)
            if (digit == radix - 1).any() and name not in flags:
                _raise_outside(qs, fields[list(columns).index(name)], name, choices, small)
            if name in choices:
                decoded[name] = pd.Categorical.from_codes(
                    digit - 1, categories=pd.Index(list(choices[name]))
                )
            elif name in flags:
                out = np.full(len(digit), None, dtype=object)
                out[digit == 2] = True
                out[digit == 1] = False
                decoded[name] = pd.Series(out, index=raw.index, dtype=object)
            else:
                value = digit - 1
                decoded[name] = (
                    np.where(digit == 0, np.nan, value.astype(np.float64))
                    if (digit == 0).any()
                    else value
                )
        if on_top is not None:
            assert rest is not None
            if (rest < 0).any():
                raise ValueError(f"column {on_top!r} holds NULL or a negative number")
            decoded[on_top] = rest
        return pd.DataFrame(
            {name: decoded[name] if name in decoded else raw[name].to_numpy() for name in columns},
            index=raw.index,
        )
    frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
    for name in choices:
        known = set(choices[name])
        present = frame[name].dropna()
        unknown = sorted(set(present.tolist()) - known)
        if unknown:
            raise ValueError(
                f"column {name!r} holds {unknown[0]!r}, not one of {list(choices[name])}"
            )
        frame[name] = pd.Categorical(frame[name], categories=list(choices[name]))
    for name, bound in small.items():
        values = pd.to_numeric(frame[name]).dropna()
        outside = values[(values < 0) | (values > bound)]
        if len(outside):
            raise ValueError(f"column {name!r} holds {outside.iloc[0]!r}, not from 0 to {bound}")
    for name in flags:
        frame[name] = frame[name].astype(object)
    for name in columns:
        if name not in choices and name not in flags and len(frame) == 0:
            frame[name] = frame[name].astype(np.int64)
    return frame


# A NULL plain integer column travels as the least 64-bit integer, which no id or count is.
_NULL_INT = -(2**63)
_NULL_INT_SQL = f"'{_NULL_INT}'::bigint"


def _fetch_binary_row(sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
    """The one row of an aggregate query, fetched in PostgreSQL's binary format, so that a
    bytea value arrives as its bytes rather than as hex text. Runs on the connection Django holds
    (so in its transaction), through a psycopg cursor that binds parameters on the server, as
    Django's client-side-binding cursors cannot fetch binary results."""
    import psycopg

    with connection.cursor() as wrapper, psycopg.Cursor(wrapper.cursor.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        row = cursor.fetchone()
    assert row is not None  # an aggregate without GROUP BY gives one row
    return tuple(row)


def _raise_outside(
    qs: QuerySet[Model],
    field: str,
    name: str,
    choices: Mapping[str, Sequence[str]],
    small: Mapping[str, int],
) -> None:
    rows = qs.order_by().exclude(**{f"{field}__isnull": True})
    if name in choices:
        found = rows.exclude(**{f"{field}__in": list(choices[name])})
        allowed = f"one of {list(choices[name])}"
    else:
        found = rows.filter(Q(**{f"{field}__lt": 0}) | Q(**{f"{field}__gt": small[name]}))
        allowed = f"from 0 to {small[name]}"
    value = found.values_list(field, flat=True).first()
    raise ValueError(f"column {name!r} holds {value!r}, not {allowed}")


def _sql_literal(value: str) -> str:
    """A choice value as an SQL string literal; choices are code constants, checked anyway."""
    if not all(ch.isalnum() or ch in "_- " for ch in value):
        raise ValueError(f"choice {value!r} is not a plain word")
    return f"'{value}'"


def _read_csv(
    csv_text: str, columns: Sequence[str], *, text: Sequence[str], flags: Sequence[str]
) -> pd.DataFrame:
    import pandas as pd

    if not csv_text:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    frame = pd.read_csv(
        io.StringIO(csv_text),
        names=list(columns),
        header=None,
        # object, not str: pandas' str dtype would store them in Arrow and converting them back
        # to Python strings costs more than parsing them.
        dtype={c: object for c in text} | {c: object for c in flags},
        keep_default_na=False,
        na_values={c: [""] for c in columns if c not in text},
    )
    for column in flags:
        # Compared column-wise rather than mapped row by row; NULL stays None.
        values = frame[column].to_numpy(dtype=object)
        out = np.full(len(values), None, dtype=object)
        out[values == "true"] = True
        out[values == "false"] = False
        frame[column] = pd.Series(out, index=frame.index, dtype=object)
    return frame
