"""Exports of raw rows: the imported MT-Bench labels come back out, in every format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from annotation.services.roles import study_member_add
from tests.conftest import Cast
from tests.leaderboard.conftest import run_import


@pytest.fixture
def imported(cast: Cast, files: dict[str, Path]) -> Study:
    run_import(files)
    study = Study.objects.get(slug="mt-bench")
    study_member_add(study=study, user=cast.researcher)
    return study


def test_judgments_export_as_csv_names_each_rater_and_canonical_preference(
    imported: Study, tmp_path: Path
) -> None:
    output = tmp_path / "judgments.csv"
    call_command(
        "export_study",
        "--study=mt-bench",
        "--table=judgments",
        "--format=csv",
        f"--output={output}",
    )
    rows = list(csv.DictReader(io.StringIO(output.read_text())))
    assert len(rows) == 4
    first = next(r for r in rows if r["rater"] == "author_1")
    assert (first["prompt"], first["turn"], first["preference"]) == ("81", "1", "B")
    assert first["is_imported"] == "true" and first["likert"] == ""


def test_calls_export_as_jsonl_keeps_the_published_verdict_label(
    imported: Study, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    response = client.get(reverse("leaderboard:study_export", args=["mt-bench", "calls", "jsonl"]))
    assert response.status_code == 200
    records = [json.loads(line) for line in response.getvalue().decode().splitlines()]
    assert sorted(r["verdict_label"] for r in records) == ["model_b", "tie (inconsistent)"]
    assert {r["judge"] for r in records} == {"gpt-4 pair, imported"}
    assert all(r["likert"] is None for r in records)


def test_pairs_export_as_parquet_reads_back_with_pyarrow(
    imported: Study, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    response = client.get(
        reverse("leaderboard:study_export", args=["mt-bench", "pairs", "parquet"])
    )
    table = pq.read_table(io.BytesIO(response.getvalue())).to_pandas()
    assert len(table) == 3
    assert set(table["source"]) == {"imported"}
    assert table["is_gold"].tolist() == [False, False, False]


def test_exports_are_404_for_an_outsider_and_for_unknown_tables(
    imported: Study, client: Client, cast: Cast
) -> None:
    client.force_login(cast.outsider)
    url = reverse("leaderboard:study_export", args=["mt-bench", "pairs", "csv"])
    assert client.get(url).status_code == 404
    client.force_login(cast.researcher)
    assert client.get(url).status_code == 200
    bad = reverse("leaderboard:study_export", args=["mt-bench", "secrets", "csv"])
    assert client.get(bad).status_code == 404
