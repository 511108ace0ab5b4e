"""The analysis pages: who may see them, and what the exports hold."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import HumanJudgment, Study
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.models import ReportSnapshot
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair


@pytest.fixture
def judged_study(cast: Cast) -> Study:
    """Two pairs in the cast's study, each judged by both workers and by one judge."""
    judge = Judge.objects.create(name="tiny judge", kind=Judge.Kind.LLM)
    run = JudgeRun.objects.create(judge=judge, study=cast.study, status=JudgeRun.Status.DONE)
    for i, external_id in enumerate(("p1", "p2")):
        pair = make_pair(cast.study, external_id)
        for worker, shown in ((cast.worker_one, 2), (cast.worker_two, 3 + i)):
            assignment = make_assignment(pair, worker, a_left=True)
            HumanJudgment.objects.create(
                study=cast.study,
                pair=pair,
                worker=worker,
                assignment=assignment,
                a_left=True,
                likert_shown=shown,
                likert=shown,
                preference="A" if shown <= 3 else "tie",
            )
        JudgeCall.objects.create(
            run=run, pair=pair, order="ab", status="done", preference="A", likert=2
        )
    return cast.study


def url(study: Study, view: str = "study_analysis", **kwargs: str) -> str:
    return reverse(f"leaderboard:{view}", kwargs={"slug": study.slug, **kwargs})


def test_member_researcher_and_admin_see_the_analysis(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    for user in (cast.researcher, cast.admin):
        client.force_login(user)
        response = client.get(url(judged_study))
        assert response.status_code == 200
        assert b"tiny judge vs human" in response.content


@pytest.mark.parametrize("who", ["outsider", "worker", "non_member_researcher"])
def test_everyone_else_gets_a_404(
    client: Client, cast: Cast, judged_study: Study, who: str
) -> None:
    if who == "outsider":
        user = cast.outsider
    elif who == "worker":
        assert cast.worker_one.user is not None
        user = cast.worker_one.user
    else:
        user = cast.researcher
        judged_study = cast.other_study
    client.force_login(user)
    for view, kwargs in (
        ("study_analysis", {}),
        ("study_analysis_report", {}),
        ("study_analysis_table", {"name": "agreement"}),
        ("study_analysis_plot", {"name": "category-correlation"}),
    ):
        assert client.get(url(judged_study, view, **kwargs)).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(client: Client, judged_study: Study) -> None:
    response = client.get(url(judged_study))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_agreement_table_downloads_as_csv_with_the_counts(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    response = client.get(url(judged_study, "study_analysis_table", name="agreement"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    human = next(r for r in rows if r["comparison"] == "human vs human")
    # p1: A and A agree; p2: A and tie disagree.
    assert (human["with ties: agree"], human["with ties: total"]) == ("1", "2")
    judge = next(
        r for r in rows if r["comparison"] == "tiny judge vs human" and r["level"] == "vote"
    )
    assert (judge["with ties: agree"], judge["with ties: total"]) == ("3", "4")


def test_position_bias_histogram_of_shown_scores_is_an_svg_download(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    response = client.get(url(judged_study, "study_analysis_plot", name="position-bias-human"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    assert response.content.startswith(b"<svg")
    assert b"<script" not in response.content


def test_json_report_download_holds_the_documented_keys(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    report = json.loads(client.get(url(judged_study, "study_analysis_report")).content)
    assert set(report["human_vs_human"]["with_ties"]) == {"agree", "total", "rate"}
    assert set(report["judges"]["tiny judge"]["vs_human"]["without_ties"]) == {
        "agree",
        "total",
        "rate",
    }
    assert report["metadata"]["raters"]["set"] == "all"
    assert report["position_bias"]["human"]["histogram"] == {
        "1": 0, "2": 2, "3": 1, "4": 1, "5": 0, "6": 0, "7": 0, "8": 0
    }  # fmt: skip


def test_an_unknown_filter_value_is_a_bad_request_that_names_the_field(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    response = client.get(url(judged_study), {"turn": "9"})
    assert response.status_code == 400
    assert b"Select a valid choice" in response.content


def test_unknown_table_and_plot_names_are_404(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    assert client.get(url(judged_study, "study_analysis_table", name="nope")).status_code == 404
    assert client.get(url(judged_study, "study_analysis_plot", name="nope")).status_code == 404


def test_the_page_is_computed_once_and_then_read_from_its_snapshot(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    client.get(url(judged_study))
    client.get(url(judged_study, "study_analysis_table", name="agreement"))
    assert ReportSnapshot.objects.filter(study=judged_study).count() == 1
    # Changed rows give a new snapshot.
    HumanJudgment.objects.filter(study=judged_study).order_by("pk").first().delete()  # type: ignore[union-attr]
    client.get(url(judged_study))
    assert ReportSnapshot.objects.filter(study=judged_study).count() == 2


def test_drill_down_lists_the_units_where_the_judge_disagrees_with_the_people(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    # p1: people A, A (majority A), judge A. p2: people A, tie (majority tie), judge A.
    response = client.get(
        url(judged_study, "study_units"), {"judge": "tiny judge", "disagree": "1"}
    )
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [r.prompt for r in rows] == ["p2"]
    assert rows[0].majority == "tie" and rows[0].judges == {"tiny judge": "A"}
    everything = client.get(url(judged_study, "study_units")).context["rows"]
    assert [r.prompt for r in everything] == ["p1", "p2"]


def test_unit_detail_shows_every_judgment_and_call_and_is_404_elsewhere(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    pair = judged_study.pairs.order_by("pk").first()
    assert pair is not None
    client.force_login(cast.researcher)
    response = client.get(url(judged_study, "study_unit", pair_id=str(pair.pk)))
    assert response.status_code == 200
    assert len(response.context["judgments"]) == 2 and len(response.context["calls"]) == 1
    assert b"answer by sys-a" in response.content
    other = reverse("leaderboard:study_unit", kwargs={"slug": "other-study", "pair_id": pair.pk})
    client.force_login(cast.admin)
    assert client.get(other).status_code == 404
