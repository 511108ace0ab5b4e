"""The export as it was before it streamed, kept as the benchmark's baseline.

The whole table is read into one DataFrame (PostgreSQL writes it as one CSV text that pandas
parses), then encoded by pandas (CSV), one ``json.dumps`` per row with a missing-value check per
cell (JSONL), or ``pyarrow.Table.from_pandas`` (Parquet, with money as float64: the exact
decimals made it fail). Not used by the application.
"""

from __future__ import annotations

import io
import json
from collections.abc import Hashable
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from annotation.models import Study
from leaderboard.selectors.exports import EXPORT_TABLES, study_export_queryset
from leaderboard.selectors.packed import frame_read

FLAGS = {"is_gold", "is_imported", "a_left", "refusal"}
FLOATS = {"score_a", "score_b", "cost_usd"}
NUMBERS = {
    "pair_id",
    "turn",
    "answer_a_id",
    "answer_b_id",
    "judgment_id",
    "likert_shown",
    "likert",
    "duration_ms",
    "call_id",
    "run_id",
    "tokens_in",
    "tokens_out",
    "latency_ms",
} | FLOATS


def baseline_frame(*, study: Study, table: str) -> pd.DataFrame:
    fields = [f for f, _ in EXPORT_TABLES[table]]
    columns = [c for _, c in EXPORT_TABLES[table]]
    frame = frame_read(
        study_export_queryset(study=study, table=table),
        fields,
        columns,
        text=[c for c in columns if c not in FLAGS | NUMBERS],
        flags=[c for c in columns if c in FLAGS],
    )
    return frame.sort_values(columns[0], kind="stable").reset_index(drop=True)


def _missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _schema(columns: list[str]) -> pa.Schema:
    def kind(column: str) -> pa.DataType:
        if column in FLAGS:
            return pa.bool_()
        if column in FLOATS:
            return pa.float64()
        if column in NUMBERS:
            return pa.int64()
        return pa.string()

    return pa.schema([pa.field(c, kind(c)) for c in columns])


def baseline_export(*, study: Study, table: str, fmt: str) -> bytes:
    """One table in one format, built in memory as the export did before."""
    frame = baseline_frame(study=study, table=table)
    if fmt == "csv":
        return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    if fmt == "jsonl":
        lines = []
        for record in frame.to_dict(orient="records"):
            clean: dict[Hashable, Any] = {
                k: (None if _missing(v) else v) for k, v in record.items()
            }
            lines.append(json.dumps(clean, ensure_ascii=False, default=str))
        return ("\n".join(lines) + "\n").encode("utf-8")
    buffer = io.BytesIO()
    arrow = pa.Table.from_pandas(frame, schema=_schema(list(frame.columns)), preserve_index=False)
    pq.write_table(arrow, buffer)
    return buffer.getvalue()
