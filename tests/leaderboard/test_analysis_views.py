"""The analysis pages: who may see them, and what the exports hold."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import HumanJudgment, Study
from core.broker import queue_length
from core.queues import Queue
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.models import ReportSnapshot
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services import reports
from leaderboard.services.reports import report_snapshot_compute, report_state_get
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair
from tests.judges.integration import broker_purge
from tests.leaderboard.conftest import analysis_worker_run, get_computed

# Session, user, roles (researcher, admin), study with membership, the data fingerprint (one
# statement), the study's report settings (one primary-key read), the snapshot, and the serving
# of the report; the filter and follow-up forms' choices come from the cache under the
# fingerprint. Pinned, so that a page that starts reading the study's rows again is noticed.
PAGE_QUERIES = 9


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
        response = get_computed(client, url(judged_study))
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
        ("study_analysis_report_html", {}),
        ("study_analysis_table", {"name": "agreement"}),
        ("study_analysis_plot", {"name": "category-correlation"}),
    ):
        assert client.get(url(judged_study, view, **kwargs)).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(client: Client, judged_study: Study) -> None:
    response = get_computed(client, url(judged_study))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_agreement_table_downloads_as_csv_with_the_counts(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    response = get_computed(client, url(judged_study, "study_analysis_table", name="agreement"))
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
    response = get_computed(
        client, url(judged_study, "study_analysis_plot", name="position-bias-human")
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    assert response.content.startswith(b"<svg")
    assert b"<script" not in response.content


def test_json_report_download_holds_the_documented_keys(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    report = json.loads(get_computed(client, url(judged_study, "study_analysis_report")).content)
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


def test_the_html_report_is_one_downloadable_file_of_the_page_filters_without_scripts(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(client, url(judged_study)).content.decode()
    html_url = url(judged_study, "study_analysis_report_html")
    assert f'href="{html_url}"' in page  # the page links its download
    response = get_computed(client, html_url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert response["Content-Disposition"] == (
        f'attachment; filename="{judged_study.slug}-agreement-report.html"'
    )
    body = response.content.decode()
    assert "tiny judge vs human" in body
    assert "<script" not in body and "<link" not in body  # self-contained, nothing to run
    assert "<svg" in body  # the plots are inline
    filtered = get_computed(client, html_url + "?turn=9")
    assert filtered.status_code == 404  # filters are checked as for the JSON


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
    assert (
        get_computed(client, url(judged_study, "study_analysis_table", name="nope")).status_code
        == 404
    )
    assert (
        get_computed(client, url(judged_study, "study_analysis_plot", name="nope")).status_code
        == 404
    )


def test_the_worker_computes_the_report_and_the_page_serves_it_until_the_data_change(
    client: Client, cast: Cast, judged_study: Study, django_capture_on_commit_callbacks: Any
) -> None:
    client.force_login(cast.researcher)
    # No snapshot yet: a progress page that reloads itself, and one task queued after commit.
    with django_capture_on_commit_callbacks() as queued:
        first = client.get(url(judged_study))
    assert b'id="report-progress"' in first.content
    assert b'http-equiv="refresh"' in first.content
    assert len(queued) == 1
    waiting = client.get(url(judged_study, "study_analysis_table", name="agreement"))
    assert waiting.status_code == 503 and waiting["Retry-After"] == "3"
    # Asking again while it is queued queues nothing more.
    with django_capture_on_commit_callbacks() as again:
        client.get(url(judged_study))
    assert again == []

    assert analysis_worker_run() == 1
    ready = client.get(url(judged_study))
    assert ready["X-Concord-Report"] == "current"
    assert b"tiny judge vs human" in ready.content
    assert b'http-equiv="refresh"' not in ready.content  # polling stops once it is done
    snapshot = ReportSnapshot.objects.get(study=judged_study)
    computed_hash = snapshot.data_hash

    # Changed rows: the stored report is shown, marked, and a recompute is queued.
    HumanJudgment.objects.filter(study=judged_study).order_by("pk").first().delete()  # type: ignore[union-attr]
    with django_capture_on_commit_callbacks() as requeued:
        stale = client.get(url(judged_study))
    assert stale["X-Concord-Report"] == "stale"
    assert b"Data changed since" in stale.content and b"tiny judge vs human" in stale.content
    assert len(requeued) == 1
    assert analysis_worker_run() == 1
    assert client.get(url(judged_study))["X-Concord-Report"] == "current"
    # One snapshot per key, now computed from the new rows.
    snapshot = ReportSnapshot.objects.get(study=judged_study)
    assert snapshot.data_hash != computed_hash


def test_a_second_delivery_of_the_same_computation_does_nothing_while_one_runs(
    judged_study: Study,
) -> None:
    state = report_state_get(study=judged_study, filters=VoteFilters())
    ReportSnapshot.objects.filter(pk=state.snapshot.pk).update(computing_since=timezone.now())
    assert report_snapshot_compute(snapshot_id=state.snapshot.pk) == "busy"
    assert ReportSnapshot.objects.get(pk=state.snapshot.pk).payload is None


def test_sixty_recompute_clicks_queue_one_report_task(
    client: Client, cast: Cast, judged_study: Study, django_capture_on_commit_callbacks: Any
) -> None:
    # Issue 27: 60 "Recompute now" clicks queued 61 report tasks.
    client.force_login(cast.researcher)
    get_computed(client, url(judged_study))
    broker_purge(settings.CELERY_BROKER_URL, "analysis")
    said: list[str] = []
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(60):
            response = client.post(url(judged_study))
            assert response.status_code == 302
            said.append(str(list(get_messages(response.wsgi_request))[-1]))  # this click's
    assert queue_length(Queue.ANALYSIS) == 1
    # Each click says what it did: the first queued it, the others found it queued.
    assert (
        said
        == ["The report is being recomputed."]
        + ["A recomputation of this report is already queued: nothing more was queued."] * 59
    )
    assert client.get(url(judged_study))["X-Concord-Report"] == "stale"
    broker_purge(settings.CELERY_BROKER_URL, "analysis")


def test_a_click_during_a_compute_queues_exactly_one_follow_up_that_is_not_lost(
    client: Client,
    cast: Cast,
    judged_study: Study,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The researcher edits a row in place and clicks "Recompute now" three times while the
    worker is reading the rows: the computation that was running must not mark its result
    current, and exactly one more is queued, which computes and is current."""
    client.force_login(cast.researcher)
    get_computed(client, url(judged_study))
    snapshot = ReportSnapshot.objects.get(study=judged_study)
    broker_purge(settings.CELERY_BROKER_URL, "analysis")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url(judged_study))
    assert queue_length(Queue.ANALYSIS) == 1
    broker_purge(settings.CELERY_BROKER_URL, "analysis")  # the worker takes the message

    read = reports.votes_and_reads_get
    clicks: list[int] = []

    said: list[str] = []

    def read_while_the_researcher_clicks(**kwargs: Any) -> Any:
        rows = read(**kwargs)
        if not clicks:
            for _ in range(3):
                response = client.post(url(judged_study))
                clicks.append(response.status_code)
                said.append(str(list(get_messages(response.wsgi_request))[-1]))
        return rows

    monkeypatch.setattr(reports, "votes_and_reads_get", read_while_the_researcher_clicks)
    with django_capture_on_commit_callbacks(execute=True):
        assert report_snapshot_compute(snapshot_id=snapshot.pk) == "computed"
    assert clicks == [302, 302, 302]
    assert (
        said
        == ["The report is being computed now; one more computation follows it, with your edits."]
        * 3
    )
    assert queue_length(Queue.ANALYSIS) == 1  # one follow-up for the three clicks
    assert client.get(url(judged_study))["X-Concord-Report"] == "stale"

    broker_purge(settings.CELERY_BROKER_URL, "analysis")
    with django_capture_on_commit_callbacks(execute=True):
        assert report_snapshot_compute(snapshot_id=snapshot.pk) == "computed"
    assert queue_length(Queue.ANALYSIS) == 0
    assert client.get(url(judged_study))["X-Concord-Report"] == "current"


def test_the_analysis_page_with_a_current_report_reads_no_rows_of_the_study(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    get_computed(client, url(judged_study))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url(judged_study))
    assert response["X-Concord-Report"] == "current"
    sql = [q["sql"] for q in queries.captured_queries]
    # The fingerprint counts rows through indexes; no query selects the judgments' columns.
    assert not [q for q in sql if "annotation_humanjudgment" in q and "likert" in q], sql
    assert len(queries) == PAGE_QUERIES, [q["sql"][:120] for q in queries.captured_queries]


def test_the_filter_choices_follow_a_change_of_the_data(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    get_computed(client, url(judged_study))
    pair = make_pair(judged_study, "p3")
    pair.prompt.category = "brand-new category"
    pair.prompt.save(update_fields=["category"])
    # A pair added changes the fingerprint, so the cached choices are read again.
    response = client.get(url(judged_study))
    assert response["X-Concord-Report"] == "stale"
    assert ("brand-new category", "brand-new category") in response.context["form"].fields[
        "category"
    ].choices


def test_drill_down_lists_the_units_where_the_judge_disagrees_with_the_people(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    client.force_login(cast.researcher)
    # p1: people A, A (majority A), judge A. p2: people A, tie (majority tie), judge A.
    response = get_computed(
        client, url(judged_study, "study_units"), data={"judge": "tiny judge", "disagree": "1"}
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


def test_unit_detail_renders_answers_as_safe_markdown_like_the_workers_page(
    client: Client, cast: Cast, judged_study: Study
) -> None:
    pair = judged_study.pairs.order_by("pk").first()
    assert pair is not None
    hostile = "**bold** <script>alert(1)</script> <img src=x onerror=alert(1)>"
    type(pair.answer_a).objects.filter(pk=pair.answer_a_id).update(turns=[hostile])
    client.force_login(cast.researcher)
    page = client.get(url(judged_study, "study_unit", pair_id=str(pair.pk))).content.decode()
    answer = page[page.index('id="answer-a"') : page.index('id="answer-b"')]
    assert "<strong>bold</strong>" in answer
    # Raw HTML stays text: no live script or image tag reaches the page.
    assert "<script" not in answer and "<img" not in answer
    assert "&lt;script&gt;" in answer
