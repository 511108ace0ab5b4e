"""The per-answer ratings (accept / reject / unsure; relevance, usefulness, factuality) leave the
platform: a column per rating and side in every judgments export and in the API, empty where the
study does not ask."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.test import Client

from annotation.models import HumanJudgment, Pair, Study, Worker
from annotation.services.roles import study_member_add
from leaderboard.selectors.exports import RATING_COLUMNS
from leaderboard.services.exports import study_export
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair

COLUMNS = (
    "acceptability_a",
    "acceptability_b",
    "relevance_a",
    "relevance_b",
    "usefulness_a",
    "usefulness_b",
    "factuality_a",
    "factuality_b",
)
# The rater's ratings in canonical terms, as the service stores them.
RATED = {
    "acceptability_a": "reject",
    "acceptability_b": "accept",
    "relevance_a": "partial",
    "relevance_b": "yes",
    "usefulness_a": "no",
    "usefulness_b": "yes",
    "factuality_a": "no",
    "factuality_b": "partial",
}


@dataclass
class Rated:
    asking: Study  # asks for acceptability and the axes
    silent: Study  # asks for neither
    rated: HumanJudgment
    unrated: HumanJudgment


def _judgment(pair: Pair, worker: Worker, **fields: object) -> HumanJudgment:
    return HumanJudgment.objects.create(
        study=pair.study,
        pair=pair,
        worker=worker,
        assignment=make_assignment(pair, worker, a_left=False),
        a_left=False,
        likert_shown=2,
        likert=7,
        preference="B",
        **fields,
    )


@pytest.fixture
def rated(cast: Cast) -> Rated:
    asking = cast.study
    Study.objects.filter(pk=asking.pk).update(form_acceptability=True, form_axes=True)
    judgment = _judgment(
        make_pair(asking, "p1"),
        cast.worker_one,
        acceptability_a="reject",
        acceptability_b="accept",
        axes={
            "a": {"relevance": "partial", "usefulness": "no", "factuality": "no"},
            "b": {"relevance": "yes", "usefulness": "yes", "factuality": "partial"},
        },
    )
    silent = cast.other_study
    study_member_add(study=silent, user=cast.researcher)
    stranger = Worker.objects.create(study=silent, panel="invite", external_id="w-silent")
    unrated = _judgment(make_pair(silent, "p2"), stranger)
    return Rated(asking, silent, judgment, unrated)


def test_the_rating_columns_are_one_per_rating_and_side() -> None:
    assert RATING_COLUMNS == COLUMNS


def test_csv_export_has_a_column_per_rating_and_side_empty_where_not_asked(rated: Rated) -> None:
    (row,) = csv.DictReader(
        io.StringIO(study_export(study=rated.asking, table="judgments", fmt="csv").decode())
    )
    assert {c: row[c] for c in COLUMNS} == RATED
    (row,) = csv.DictReader(
        io.StringIO(study_export(study=rated.silent, table="judgments", fmt="csv").decode())
    )
    assert {c: row[c] for c in COLUMNS} == dict.fromkeys(COLUMNS, "")


def test_csv_export_tells_a_rating_not_asked_from_an_empty_text(rated: Rated) -> None:
    # PostgreSQL quotes an empty text and leaves NULL bare: a rating not asked is NULL.
    text = study_export(study=rated.silent, table="judgments", fmt="csv").decode()
    header, line = text.splitlines()
    assert header.split(",")[-8:] == list(COLUMNS)
    assert line.endswith(",,,,,,,,")


def test_jsonl_export_carries_the_ratings_and_null_where_not_asked(rated: Rated) -> None:
    (record,) = [
        json.loads(line)
        for line in study_export(study=rated.asking, table="judgments", fmt="jsonl").splitlines()
    ]
    assert {c: record[c] for c in COLUMNS} == RATED
    (record,) = [
        json.loads(line)
        for line in study_export(study=rated.silent, table="judgments", fmt="jsonl").splitlines()
    ]
    assert {c: record[c] for c in COLUMNS} == dict.fromkeys(COLUMNS)


def test_parquet_export_types_the_ratings_as_strings_null_where_not_asked(rated: Rated) -> None:
    table = pq.read_table(
        io.BytesIO(study_export(study=rated.asking, table="judgments", fmt="parquet"))
    )
    assert all(table.schema.field(c).type == pa.string() for c in COLUMNS)
    assert {c: table.column(c).to_pylist() for c in COLUMNS} == {c: [v] for c, v in RATED.items()}
    table = pq.read_table(
        io.BytesIO(study_export(study=rated.silent, table="judgments", fmt="parquet"))
    )
    assert {c: table.column(c).to_pylist() for c in COLUMNS} == {c: [None] for c in COLUMNS}


def test_the_judgments_api_carries_the_ratings_and_null_where_not_asked(
    rated: Rated, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    (row,) = client.get("/api/v1/studies/main-study/judgments/").json()["results"]
    assert {c: row[c] for c in COLUMNS} == RATED
    (row,) = client.get("/api/v1/studies/other-study/judgments/").json()["results"]
    assert {c: row[c] for c in COLUMNS} == dict.fromkeys(COLUMNS)
