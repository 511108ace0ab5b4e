"""Exports of a study's raw rows (pairs, human judgments, judge calls) as CSV, JSONL or Parquet."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from typing import Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from annotation.models import Study
from leaderboard.selectors import (
    EXPORT_FLAGS,
    EXPORT_FLOATS,
    EXPORT_NUMBERS,
    EXPORT_TABLES,
    study_export_frame,
)

ExportFormat = Literal["csv", "jsonl", "parquet"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("csv", "jsonl", "parquet")
CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    """The Parquet schema of an export's columns, fixed so that every row group matches:
    whole numbers as int64, money and scores as float64, flags as bool, the rest as strings."""
    fields = []
    for column in columns:
        if column in EXPORT_FLAGS:
            kind = pa.bool_()
        elif column in EXPORT_FLOATS:
            kind = pa.float64()
        elif column in EXPORT_NUMBERS:
            kind = pa.int64()
        else:
            kind = pa.string()
        fields.append(pa.field(column, kind, nullable=True))
    return pa.schema(fields)


def frame_records(frame: pd.DataFrame) -> Iterator[str]:
    """The rows as JSON objects, one line each (no newline), missing values as null."""
    for record in frame.to_dict(orient="records"):
        clean = {k: (None if _missing(v) else v) for k, v in record.items()}
        yield json.dumps(clean, ensure_ascii=False, sort_keys=False, default=str)


def frame_encode(*, frame: pd.DataFrame, fmt: ExportFormat) -> bytes:
    """The rows as file bytes: CSV with a header, one JSON object per line, or Parquet."""
    if fmt == "csv":
        return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    if fmt == "jsonl":
        lines = list(frame_records(frame))
        return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
    if fmt == "parquet":
        buffer = io.BytesIO()
        table = pa.Table.from_pandas(
            frame, schema=arrow_schema(list(frame.columns)), preserve_index=False
        )
        pq.write_table(table, buffer)
        return buffer.getvalue()
    raise ValueError(f"format must be one of {EXPORT_FORMATS}, not {fmt!r}")


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def study_export(*, study: Study, table: str, fmt: ExportFormat) -> bytes:
    """Export one table of the study's raw rows in one format."""
    if table not in EXPORT_TABLES:
        raise ValueError(f"table must be one of {sorted(EXPORT_TABLES)}, not {table!r}")
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {EXPORT_FORMATS}, not {fmt!r}")
    return frame_encode(frame=study_export_frame(study=study, table=table), fmt=fmt)
