"""The drill-down's unit list: one page of the units stored with the report's snapshot, read in
SQL, never the study's votes; the same rows the votes give."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from annotation.models import HumanJudgment, Pair, Study
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.models import ReportSnapshot, ReportUnit
from leaderboard.selectors.frames import VoteFilters, study_votes_get
from leaderboard.views import StudyUnitListView
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair
from tests.leaderboard.conftest import analysis_worker_run, get_computed
from tests.leaderboard.reference_units import unit_rows_get

# Session, user, three role checks, study with membership, the data fingerprint (one
# statement), the study's report settings, the snapshot, then the units: their count and one
# page of them. Pinned, so that a unit list that starts reading the study's votes is noticed.
UNIT_LIST_QUERIES = 11
PAIRS = 23

# The people's two votes and the judge's vote on pair i, cycling: agreeing, disagreeing, people
# split (majority tie), no judge vote, no human vote.
VOTES = (("A", "A", "A"), ("B", "B", "A"), ("A", "B", "B"), ("tie", "tie", None), (None, None, "B"))
LIKERT = {"A": 2, "tie": 4, "B": 7}


@pytest.fixture
def big_study(cast: Cast) -> Study:
    """PAIRS pairs in the cast's study, most voted on by both workers and by one judge (as
    VOTES cycles), every third by a second judge (B)."""
    judge = Judge.objects.create(name="tiny judge", kind=Judge.Kind.LLM)
    run = JudgeRun.objects.create(judge=judge, study=cast.study, status=JudgeRun.Status.DONE)
    other = Judge.objects.create(name="other judge", kind=Judge.Kind.LLM)
    other_run = JudgeRun.objects.create(judge=other, study=cast.study, status=JudgeRun.Status.DONE)
    for i in range(PAIRS):
        pair = make_pair(cast.study, f"p{i:02d}")
        first, second, verdict = VOTES[i % len(VOTES)]
        if i % 3 == 0:
            JudgeCall.objects.create(
                run=other_run, pair=pair, order="ab", status="done", preference="B", likert=7
            )
        for worker, label in ((cast.worker_one, first), (cast.worker_two, second)):
            if label is None:
                continue
            HumanJudgment.objects.create(
                study=cast.study,
                pair=pair,
                worker=worker,
                assignment=make_assignment(pair, worker, a_left=True),
                a_left=True,
                likert_shown=LIKERT[label],
                likert=LIKERT[label],
                preference=label,
            )
        if verdict is not None:
            JudgeCall.objects.create(
                run=run,
                pair=pair,
                order="ab",
                status="done",
                preference=verdict,
                likert=LIKERT[verdict],
            )
    return cast.study


def units_url(study: Study) -> str:
    return reverse("leaderboard:study_units", kwargs={"slug": study.slug})


class RowsRead:
    """Each statement's SQL and the number of rows it returned."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, int]] = []

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        result = execute(sql, params, many, context)
        cursor = context["cursor"]
        self.statements.append((sql, cursor.rowcount if cursor.description else 0))
        return result


def test_the_unit_list_waits_for_the_report_then_lists_its_units(
    client: Client, cast: Cast, big_study: Study
) -> None:
    client.force_login(cast.researcher)
    waiting = client.get(units_url(big_study))
    assert waiting.status_code == 200 and waiting["X-Concord-Report"] == "computing"
    assert b'id="report-progress"' in waiting.content
    assert b'http-equiv="refresh"' in waiting.content

    listed = get_computed(client, units_url(big_study))
    assert listed["X-Concord-Report"] == "current"
    assert listed.context["count"] == PAIRS
    assert [row.prompt for row in listed.context["rows"]] == [f"p{i:02d}" for i in range(PAIRS)]


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"judge": "tiny judge"},
        {"judge": "tiny judge", "disagree": "1"},
        {"judge": "other judge", "disagree": "1"},
        {"judge": "nobody"},
    ],
    ids=[
        "every unit",
        "a judge's units",
        "where the judge disagrees",
        "where a judge of few units disagrees",
        "an unknown judge",
    ],
)
def test_the_stored_units_are_the_rows_the_votes_give(
    client: Client, cast: Cast, big_study: Study, query: dict[str, str]
) -> None:
    client.force_login(cast.researcher)
    listed = get_computed(client, units_url(big_study), data=query)

    votes = study_votes_get(study=big_study, filters=VoteFilters())
    expected = unit_rows_get(
        votes=votes, judge=query.get("judge"), disagree=query.get("disagree") == "1"
    )
    assert listed.context["sources"] == ["other judge", "tiny judge"]
    assert listed.context["rows"] == expected
    assert listed.context["count"] == len(expected)
    if query.get("disagree") and query["judge"] == "tiny judge":
        # Pairs 1 (people B, judge A) and 2 (people split: tie, judge B) of each five; not 4
        # (no human vote, so no majority).
        assert [r.prompt for r in expected] == [
            f"p{i:02d}" for i in range(PAIRS) if i % len(VOTES) in (1, 2)
        ]


def test_a_large_studys_unit_list_reads_one_page_of_units_and_no_votes(
    client: Client, cast: Cast, big_study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(StudyUnitListView, "page_size", 5)
    client.force_login(cast.researcher)
    get_computed(client, units_url(big_study))
    snapshot = ReportSnapshot.objects.get(study=big_study)
    assert ReportUnit.objects.filter(snapshot=snapshot).count() == PAIRS

    rows_read = RowsRead()
    with connection.execute_wrapper(rows_read):
        response = client.get(units_url(big_study), {"page": "3"})

    assert response["X-Concord-Report"] == "current"
    assert [row.prompt for row in response.context["rows"]] == [f"p{i:02d}" for i in range(10, 15)]
    assert response.context["count"] == PAIRS
    assert "page 3 of 5" in response.content.decode()
    sql = [statement for statement, _ in rows_read.statements]
    assert len(sql) == UNIT_LIST_QUERIES, "\n".join(s[:150] for s in sql)
    # No statement reads the votes (the fingerprint only counts them through indexes).
    assert not [s for s in sql if "annotation_humanjudgment" in s and "likert" in s], sql
    assert not [s for s in sql if "judges_judgecall" in s and "preference" in s], sql
    # The units come as one page: no statement returns more rows than a page holds.
    assert max(rows for _, rows in rows_read.statements) <= 5
    units = [(s, rows) for s, rows in rows_read.statements if "leaderboard_reportunit" in s]
    assert [rows for _, rows in units] == [1, 5]  # the count, then the page
    assert "LIMIT 5 OFFSET 10" in units[1][0]


def test_units_are_replaced_when_the_report_is_computed_again(
    client: Client, cast: Cast, big_study: Study
) -> None:
    client.force_login(cast.researcher)
    get_computed(client, units_url(big_study))
    pair = Pair.objects.filter(study=big_study).order_by("pk").first()
    assert pair is not None
    HumanJudgment.objects.filter(pair=pair).delete()
    assert client.get(units_url(big_study))["X-Concord-Report"] == "stale"  # queues it
    assert analysis_worker_run() == 1

    listed = client.get(units_url(big_study))

    assert listed["X-Concord-Report"] == "current"
    first = listed.context["rows"][0]
    assert (first.pair_id, first.human_a, first.majority) == (pair.pk, 0, "")
    assert ReportUnit.objects.filter(snapshot__study=big_study).count() == PAIRS


def test_a_code_upgrade_prunes_the_units_of_the_snapshots_it_supersedes(
    client: Client, cast: Cast, big_study: Study
) -> None:
    client.force_login(cast.researcher)
    get_computed(client, units_url(big_study))
    current = ReportSnapshot.objects.get(study=big_study)
    # The same key computed by an older Concord, and another key (other parameters) by this one.
    older = ReportSnapshot.objects.create(
        study=big_study,
        kind=current.kind,
        params_hash=current.params_hash,
        params=current.params,
        code_version="an older code version",
        seed=current.seed,
    )
    other = ReportSnapshot.objects.create(
        study=big_study,
        kind=current.kind,
        params_hash="other parameters",
        seed=current.seed,
        params=current.params,
        code_version=current.code_version,
    )
    for snapshot in (older, other):
        ReportUnit.objects.bulk_create(
            ReportUnit(snapshot=snapshot, pair_id=i, prompt="p", turn=1, system_a="a",
                       system_b="b", human_a=0, human_b=0, human_tie=0)
            for i in range(5)
        )  # fmt: skip
    HumanJudgment.objects.filter(pair__study=big_study).first().delete()  # type: ignore[union-attr]
    assert client.get(units_url(big_study))["X-Concord-Report"] == "stale"
    assert analysis_worker_run() == 1

    assert ReportUnit.objects.filter(snapshot=current).count() == PAIRS
    assert not ReportUnit.objects.filter(snapshot=older).exists()
    # Another key stays: the study's settings may come back to it.
    assert ReportUnit.objects.filter(snapshot=other).count() == 5
