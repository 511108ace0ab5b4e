"""Streamed exports: exact money, whole numbers that stay whole, formulas neutralised in CSV only,
and bytes handed on in chunks."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from annotation.models import HumanJudgment, Study
from annotation.services.workers import worker_exclude
from core.csvsafe import csv_cell, csv_cell_sql
from judges.models import JudgeCall
from leaderboard.selectors.exports import study_export_count
from leaderboard.services import exports
from leaderboard.services.exports import Column, json_lines, study_export, study_export_stream
from tests.conftest import Cast

HOSTILE = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


@pytest.fixture
def priced(export_study: Study) -> list[JudgeCall]:
    """The two imported calls: one free (cost 0, stored as 0E-8), one with a price, a latency
    and a Likert score shown."""
    free, paid = JudgeCall.objects.filter(run__study=export_study).order_by("pk")
    JudgeCall.objects.filter(pk=paid.pk).update(
        cost_usd=Decimal("0.00012345"), latency_ms=54, likert_shown=2, likert=2, tokens_in=7
    )
    return [free, paid]


def download(client: Client, table: str, fmt: str) -> bytes:
    response = client.get(reverse("leaderboard:study_export", args=["mt-bench", table, fmt]))
    assert response.status_code == 200, response
    return response.getvalue()


def test_calls_parquet_downloads_with_money_as_exact_decimals(
    priced: list[JudgeCall], client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    table = pq.read_table(io.BytesIO(download(client, "calls", "parquet")))
    assert table.schema.field("cost_usd").type == pa.decimal128(12, 8)
    assert table.column("cost_usd").to_pylist() == [Decimal("0E-8"), Decimal("0.00012345")]
    assert table.schema.field("latency_ms").type == pa.int64()
    assert table.column("latency_ms").to_pylist() == [None, 54]


def test_csv_writes_nullable_whole_numbers_as_whole_numbers(
    priced: list[JudgeCall], client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    rows = list(csv.DictReader(io.StringIO(download(client, "calls", "csv").decode())))
    free, paid = rows
    assert (paid["likert_shown"], paid["latency_ms"], paid["tokens_in"]) == ("2", "54", "7")
    assert (free["likert_shown"], free["latency_ms"]) == ("", "")
    assert (free["cost_usd"], paid["cost_usd"]) == ("0.00000000", "0.00012345")
    judgments = download(client, "judgments", "csv").decode()
    assert ".0," not in judgments


def test_jsonl_writes_money_as_an_exact_number_and_missing_values_as_null(
    priced: list[JudgeCall], client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    lines = download(client, "calls", "jsonl").decode().splitlines()
    free, paid = (json.loads(line, parse_float=Decimal) for line in lines)
    assert (free["cost_usd"], paid["cost_usd"]) == (Decimal("0E-8"), Decimal("0.00012345"))
    assert (free["latency_ms"], paid["latency_ms"], paid["likert_shown"]) == (None, 54, 2)
    assert paid["refusal"] is False


def test_formulas_are_neutralised_in_csv_and_kept_raw_in_jsonl_and_parquet(
    export_study: Study,
) -> None:
    judgments = list(HumanJudgment.objects.filter(study=export_study).order_by("pk"))
    for judgment, text in zip(judgments, HOSTILE, strict=False):
        HumanJudgment.objects.filter(pk=judgment.pk).update(comment=text, reason=text)
    written = HOSTILE[: len(judgments)]

    rows = list(
        csv.DictReader(
            io.StringIO(
                study_export(study=export_study, table="judgments", fmt="csv").decode(), newline=""
            )
        )
    )
    assert [r["comment"] for r in rows] == ["'" + text for text in written]
    assert [r["reason"] for r in rows] == ["'" + text for text in written]
    assert rows[0]["values"] == "[]"  # the JSON of the cited values, starting with no formula

    lines = study_export(study=export_study, table="judgments", fmt="jsonl").decode().splitlines()
    assert [json.loads(line)["comment"] for line in lines] == written
    parquet = pq.read_table(
        io.BytesIO(study_export(study=export_study, table="judgments", fmt="parquet"))
    )
    assert parquet.column("comment").to_pylist() == written


def test_an_export_is_handed_on_in_chunks_of_whole_rows(
    priced: list[JudgeCall], monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = study_export(study=priced[0].run.study, table="calls", fmt="csv")
    monkeypatch.setattr(exports, "STREAM_CHUNK_BYTES", 1)
    stream = study_export_stream(study=priced[0].run.study, table="calls", fmt="csv")
    chunks = list(stream)
    # The header, then one chunk per row: no chunk waits for the whole table.
    assert len(chunks) == 1 + len(priced) and stream.rows == len(priced)
    assert b"".join(chunks) == whole
    assert all(chunk.endswith(b"\n") for chunk in chunks)


def test_jsonl_and_parquet_are_encoded_chunk_by_chunk(
    export_study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one row per COPY chunk, JSONL hands on one line per chunk and Parquet one row group
    per `chunk_rows` rows: neither waits for the whole table before writing."""
    whole_jsonl = study_export(study=export_study, table="judgments", fmt="jsonl")
    monkeypatch.setattr(exports, "STREAM_CHUNK_BYTES", 1)
    rows = HumanJudgment.objects.filter(study=export_study).count()

    jsonl = list(study_export_stream(study=export_study, table="judgments", fmt="jsonl"))
    assert len(jsonl) == rows and all(chunk.count(b"\n") == 1 for chunk in jsonl)
    assert b"".join(jsonl) == whole_jsonl

    stream = study_export_stream(study=export_study, table="judgments", fmt="parquet", chunk_rows=1)
    parquet = list(stream)
    assert len(parquet) == rows + 1  # a row group after each row, then the footer
    assert pq.ParquetFile(io.BytesIO(b"".join(parquet))).metadata.num_row_groups == rows


def test_an_unknown_table_or_format_is_refused_by_name(export_study: Study) -> None:
    with pytest.raises(ValueError, match="'secrets'"):
        study_export_stream(study=export_study, table="secrets", fmt="csv")
    with pytest.raises(ValueError, match="'xlsx'"):
        study_export_stream(study=export_study, table="calls", fmt="xlsx")


def test_jsonl_round_trips_every_character_and_writes_a_non_number_as_null(
    priced: list[JudgeCall],
) -> None:
    nasty = 'say "hi" \\ back\nslash\ttab\r\x01\x1f ünï 中文 \u2028 🙂'
    free, paid = priced
    JudgeCall.objects.filter(pk=free.pk).update(raw_output=nasty, score_a=0.1, score_b=float("nan"))
    study = free.run.study
    # Lines end at "\n" only (str.splitlines would also split at U+2028).
    lines = study_export(study=study, table="calls", fmt="jsonl").decode().split("\n")[:-1]
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["raw_output"] == nasty
    assert (first["score_a"], first["score_b"]) == (0.1, None)
    assert first["judge"] == "gpt-4 pair, imported"


@pytest.mark.django_db
def test_the_databases_neutraliser_agrees_with_csvsafe_cell_by_cell() -> None:
    cells = [*HOSTILE, "-1.5", "+3", "-.5", "1e5", "-1e-3", "- 1", "-1.5x", "plain", "", "'=x", "@"]
    with connection.cursor() as cursor:
        for cell in cells:
            cursor.execute(f"SELECT {csv_cell_sql('%s')}", [cell] * 4)
            assert cursor.fetchone()[0] == csv_cell(cell), repr(cell)


def exported_ids(study: Study, fmt: str) -> list[int]:
    """The judgment ids of the study's judgments export in one format, as read back."""
    data = study_export(study=study, table="judgments", fmt=fmt)
    if fmt == "csv":
        return [int(row["judgment_id"]) for row in csv.DictReader(io.StringIO(data.decode()))]
    if fmt == "jsonl":
        return [json.loads(line)["judgment_id"] for line in data.decode().splitlines()]
    return pq.read_table(io.BytesIO(data)).column("judgment_id").to_pylist()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_an_excluded_participants_judgments_leave_the_export_as_they_leave_the_report(
    export_study: Study, fmt: str
) -> None:
    judgments = list(HumanJudgment.objects.filter(study=export_study).order_by("pk"))
    excluded = judgments[0].worker
    kept = [j.pk for j in judgments if j.worker_id != excluded.pk]
    assert 0 < len(kept) < len(judgments)
    assert exported_ids(export_study, fmt) == [j.pk for j in judgments]

    worker_exclude(worker=excluded, reason="Fabricated participant")

    assert exported_ids(export_study, fmt) == kept
    assert study_export_count(study=export_study, table="judgments") == len(kept)
    # The same rows as the report's votes read (leaderboard.selectors.frames).
    analysed = HumanJudgment.objects.filter(study=export_study, excluded=False)
    assert sorted(analysed.values_list("pk", flat=True)) == kept


def test_json_lines_agree_with_json_dumps_for_every_ascii_character_and_missing_text() -> None:
    """Every character from U+0000 to U+007F (and a few beyond) in a text column with a NULL
    and in one without: each line reads back as the row it was written from."""
    texts = [chr(code) for code in range(0x80)] + ['\\"\\n', "ünï 中文 \u2028 🙂", ""]
    columns = (
        Column("id", "int"),
        Column("text", "text"),
        Column("maybe", "text"),
        Column("score", "float"),
        Column("flag", "bool"),
    )
    rows = [
        {
            "id": index,
            "text": text,
            "maybe": None if index % 3 == 0 else text,
            "score": [0.5, float("inf"), None][index % 3],
            "flag": [True, False, None][index % 3],
        }
        for index, text in enumerate(texts)
    ]
    table = pa.table(
        {c.name: pa.array([r[c.name] for r in rows], type=c.arrow_type()) for c in columns}
    )
    lines = json_lines(table, columns).decode().split("\n")
    assert lines.pop() == ""
    expected = [r | {"score": None if r["score"] == float("inf") else r["score"]} for r in rows]
    assert [json.loads(line) for line in lines] == expected
