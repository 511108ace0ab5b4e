"""The agreement section shows how often people and each judge vote a tie."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.models import HumanJudgment, Study
from leaderboard.report.agreement import tie_share
from leaderboard.report.base import RenderContext
from leaderboard.report.document import report_from_payload
from leaderboard.report.registry import SECTIONS
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.leaderboard.conftest import run_import
from tests.leaderboard.test_report_fast_path import random_study_files

FAST = ReportParams(ci_rounds=20, elo_rounds=5, bt_rounds=5)


def test_tie_share_is_ties_over_votes() -> None:
    assert tie_share({"A": 3, "tie": 1, "B": 4}) == pytest.approx(1 / 8)
    assert tie_share({"A": 0, "tie": 0, "B": 0}) is None


@pytest.mark.django_db
def test_the_ties_table_puts_each_judges_tie_share_beside_the_peoples(tmp_path: Path) -> None:
    run_import(random_study_files(tmp_path, 3))
    study = Study.objects.get(slug="mt-bench")
    report = report_from_payload(agreement_report_build(study=study, params=FAST))
    section = next(s for s in SECTIONS if s.key == "agreement")
    result = report.results["agreement"]
    tables = section.tables(result, RenderContext(tuple(result.judges), ""))
    ties = next(t for t in tables if t.name == "ties")
    rows = {row[0]: row for row in ties.rows}
    people = HumanJudgment.objects.filter(pair__study=study)
    votes = people.count()
    tied = people.filter(preference="tie").count()
    assert rows["people"][1:4] == (votes, tied, pytest.approx(tied / votes))
    assert set(rows) == {"people", *result.judges}
    for name, judge in result.judges.items():
        assert rows[name][1] == judge.votes
        assert rows[name][3] == pytest.approx(judge.labels["tie"] / judge.votes)
