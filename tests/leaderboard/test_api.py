"""The read-only analysis API: who sees what, pagination, the report, the OpenAPI schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Study
from annotation.services.roles import study_member_add
from tests.conftest import Cast
from tests.leaderboard.conftest import get_computed, run_import


@pytest.fixture
def imported(cast: Cast, files: dict[str, Path]) -> Study:
    run_import(files)
    study = Study.objects.get(slug="mt-bench")
    study_member_add(study=study, user=cast.researcher)
    return study


def test_a_researcher_lists_only_the_studies_they_belong_to_with_counts(
    client: Client, cast: Cast, imported: Study
) -> None:
    client.force_login(cast.researcher)
    studies = client.get("/api/v1/studies/").json()
    assert [s["slug"] for s in studies] == ["main-study", "mt-bench"]
    mtbench = studies[1]
    assert (mtbench["prompt_count"], mtbench["pair_count"], mtbench["judgment_count"]) == (
        2,
        3,
        4,
    )


def test_an_outsider_lists_no_studies_and_gets_404_on_a_study(
    client: Client, cast: Cast, imported: Study
) -> None:
    client.force_login(cast.outsider)
    assert client.get("/api/v1/studies/").json() == []
    for path in ("report", "pairs", "judgments", "calls"):
        assert client.get(f"/api/v1/studies/mt-bench/{path}/").status_code == 404


def test_anonymous_requests_are_refused(client: Client, imported: Study) -> None:
    assert client.get("/api/v1/studies/").status_code == 403
    assert client.get("/api/v1/studies/mt-bench/pairs/").status_code == 403


def test_judgments_page_through_in_a_fixed_number_of_queries(
    client: Client, cast: Cast, imported: Study
) -> None:
    client.force_login(cast.researcher)
    first = client.get("/api/v1/studies/mt-bench/judgments/?page_size=3").json()
    assert first["count"] == 4 and len(first["results"]) == 3
    assert {r["rater"] for r in first["results"]} <= {"expert_1", "author_1", "expert_2"}
    with CaptureQueriesContext(connection) as small:
        client.get("/api/v1/studies/mt-bench/judgments/?page_size=1")
    with CaptureQueriesContext(connection) as large:
        client.get("/api/v1/studies/mt-bench/judgments/?page_size=4")
    assert len(small) == len(large)


def test_the_report_endpoint_takes_the_page_filters(
    client: Client, cast: Cast, imported: Study
) -> None:
    client.force_login(cast.researcher)
    report = get_computed(client, "/api/v1/studies/mt-bench/report/?turn=1&raters=all").json()
    assert report["metadata"]["parameters"]["filters"]["turn"] == 1
    # Turn 1 of the small files: expert_1 and author_1 both chose B on the same pair.
    assert report["human_vs_human"]["with_ties"] == {"agree": 1, "total": 1, "rate": 1.0}
    bad = client.get("/api/v1/studies/mt-bench/report/?turn=5")
    assert bad.status_code == 400 and "turn" in bad.json()


def test_the_openapi_schema_and_docs_page_describe_every_endpoint(
    client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    schema = client.get("/api/v1/schema/").json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) == {
        "/api/v1/studies/",
        "/api/v1/studies/{slug}/report/",
        "/api/v1/studies/{slug}/pairs/",
        "/api/v1/studies/{slug}/judgments/",
        "/api/v1/studies/{slug}/calls/",
    }
    assert "rater" in schema["components"]["schemas"]["Judgment"]["properties"]
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    assert b"/api/v1/studies/{slug}/calls/" in docs.content


def test_the_api_root_lists_every_endpoint_with_the_schema_and_docs(
    client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    index = client.get("/api/v1/")
    assert index.status_code == 200
    body = index.json()
    schema = client.get("/api/v1/schema/").json()
    listed = {e["url"].removeprefix("http://testserver") for e in body["endpoints"]}
    assert listed == set(schema["paths"])  # the index and the schema describe the same API
    report = next(e for e in body["endpoints"] if e["name"] == "study_report")
    assert report["description"].startswith("The study's agreement report")
    assert body["schema"] == "http://testserver/api/v1/schema/"
    assert body["docs"] == "http://testserver/api/v1/docs/"


def test_the_api_root_is_refused_to_anonymous_clients_and_workers(
    client: Client, cast: Cast
) -> None:
    assert client.get("/api/v1/").status_code == 403
    assert cast.worker_one.user is not None
    client.force_login(cast.worker_one.user)
    assert client.get("/api/v1/").status_code == 403


def test_the_judgments_endpoint_leaves_out_excluded_participants_as_the_exports_do(
    client: Client, cast: Cast, imported: Study
) -> None:
    from annotation.models import HumanJudgment, Worker
    from annotation.services.workers import worker_exclude

    client.force_login(cast.researcher)
    before = client.get("/api/v1/studies/mt-bench/judgments/?page_size=100").json()
    rater = Worker.objects.get(study=imported, external_id="expert_1")
    dropped = HumanJudgment.objects.filter(worker=rater).count()
    assert dropped > 0
    worker_exclude(worker=rater, reason="answered at random in the pilot")
    after = client.get("/api/v1/studies/mt-bench/judgments/?page_size=100").json()
    assert after["count"] == before["count"] - dropped
    assert "expert_1" not in {row["rater"] for row in after["results"]}
