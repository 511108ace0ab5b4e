"""The run pages: who may see them, what they show, and the buttons that drive a run."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.models import Judge, JudgeCall, JudgeRun
from judges.services import runs as run_services
from judges.services.calls import judge_call_execute
from judges.services.judges import judge_create
from judges.services.runs import judge_run_start
from tests.conftest import PASSWORD
from tests.judges.conftest import KEY_ENV, make_llm_judge, make_marked_pairs
from tests.judges.integration import broker_url_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(cast, fake, api_key):
    make_marked_pairs(cast.study, 2)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    first = run.calls.order_by("pk")[0]
    judge_call_execute(call_id=first.pk)
    return run


def login(client, user):
    assert client.login(username=user.username, password=PASSWORD)
    return client


def urls(run):
    slug = run.study.slug
    call = run.calls.order_by("pk").first()
    return [
        reverse("judges:run_list", args=[slug]),
        reverse("judges:run_detail", args=[slug, run.pk]),
        reverse("judges:run_progress", args=[slug, run.pk]),
        reverse("judges:call_detail", args=[slug, run.pk, call.pk]),
    ]


def test_members_and_admins_see_the_run_pages(client, cast, run):
    for user in (cast.researcher, cast.admin):
        login(client, user)
        for url in urls(run):
            assert client.get(url).status_code == 200, url


def test_annotators_outsiders_and_other_studies_researchers_get_404(client, cast, run):
    for user in (cast.worker_one.user, cast.outsider):
        login(client, user)
        for url in urls(run):
            assert client.get(url).status_code == 404, (user, url)
    login(client, cast.researcher)
    wrong_study = reverse("judges:run_detail", args=[cast.other_study.slug, run.pk])
    assert client.get(wrong_study).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(client, run):
    response = client.get(urls(run)[1])
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_progress_json_counts_the_run_calls(client, cast, run):
    login(client, cast.researcher)
    data = client.get(urls(run)[2]).json()
    assert (data["total"], data["done"], data["pending"], data["failed"]) == (4, 1, 3, 0)
    assert data["status"] == "running"
    assert float(data["cost_usd"]) > 0 and float(data["estimated_to_finish_usd"]) > 0


def test_run_page_shows_the_progress_bar_and_the_calls(
    client, cast, run, django_assert_max_num_queries
):
    login(client, cast.researcher)
    with django_assert_max_num_queries(15):
        response = client.get(urls(run)[1])
    html = response.content.decode()
    assert '<progress id="progress-bar" max="4" value="1">' in html
    assert f'data-url="/studies/main-study/judges/runs/{run.pk}/progress.json"' in html
    assert f"/runs/{run.pk}/calls/" in html and "Cancel" in html


def test_call_page_shows_the_prompt_as_sent_and_the_raw_output_escaped(client, cast, run):
    call = run.calls.order_by("pk").first()
    JudgeCall.objects.filter(pk=call.pk).update(raw_output="3\n<script>alert('x')</script>")
    login(client, cast.researcher)
    html = client.get(urls(run)[3]).content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<script>alert" not in html
    assert "(ref main-study.p0-A)" in html
    assert "Likert, canonical" in html


def test_cancel_and_resume_buttons_drive_the_run(client, cast, run):
    login(client, cast.researcher)
    slug = run.study.slug
    client.post(reverse("judges:run_cancel", args=[slug, run.pk]))
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.CANCELLED
    client.post(reverse("judges:run_resume", args=[slug, run.pk]), {"budget_usd": "5"})
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.RUNNING and str(run.budget_usd) == "5.000000"


def test_outsiders_cannot_cancel_a_run(client, cast, run):
    login(client, cast.outsider)
    response = client.post(reverse("judges:run_cancel", args=[run.study.slug, run.pk]))
    assert response.status_code == 404
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.RUNNING


def test_starting_a_run_from_the_page_queues_it_and_redirects(client, cast):
    make_marked_pairs(cast.study, 1)
    judge = judge_create(name="coin", kind=Judge.Kind.RANDOM)
    login(client, cast.researcher)
    response = client.post(reverse("judges:run_list", args=[cast.study.slug]), {"judge": judge.pk})
    run = JudgeRun.objects.get(judge=judge)
    assert response.status_code == 302
    assert response["Location"] == reverse("judges:run_detail", args=[cast.study.slug, run.pk])
    assert run.calls.count() == 2


def test_a_judge_without_its_key_shows_what_to_set_and_starts_nothing(
    client, cast, fake, monkeypatch
):
    monkeypatch.delenv(KEY_ENV, raising=False)
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake)
    login(client, cast.researcher)
    page = client.get(reverse("judges:run_list", args=[cast.study.slug])).content.decode()
    assert f"not configured: set {KEY_ENV}" in page
    response = client.post(reverse("judges:run_list", args=[cast.study.slug]), {"judge": judge.pk})
    assert response.status_code == 409
    assert f"set {KEY_ENV}" in response.content.decode()
    assert not JudgeRun.objects.exists()


def test_a_run_whose_broker_is_unreachable_says_so_with_the_time_it_was_first_seen(
    client, cast, run, settings
):
    login(client, cast.researcher)
    run_services._broker_seen.clear()
    try:
        with broker_url_set("redis://127.0.0.1:1/0"):
            first = client.get(urls(run)[2]).json()["stall"]
            run_services._broker_seen.clear()
            again = client.get(urls(run)[1]).content.decode()
    finally:
        run_services._broker_seen.clear()
    assert first.startswith("Broker unreachable since ")
    assert "the Celery broker at redis://127.0.0.1:1/0 does not answer" in first
    # The time is the first failure's, kept while the outage lasts.
    assert first in again.replace("&#x27;", "'")
    assert client.get(urls(run)[2]).json()["stall"] == ""


def test_the_run_and_call_pages_show_what_may_have_been_paid_twice_and_a_calls_lease(
    client, cast, run
):
    call = run.calls.filter(status="pending").order_by("pk").first()
    lease = timezone.now() + timedelta(seconds=90)
    JudgeCall.objects.filter(pk=call.pk).update(
        status="running", attempts=2, lease_expires_at=lease, unrecorded_requests=1
    )
    JudgeRun.objects.filter(pk=run.pk).update(exposure_usd=Decimal("0.0123"))
    login(client, cast.researcher)
    data = client.get(urls(run)[2]).json()
    assert (data["possibly_charged_twice"], data["possibly_charged_twice_usd"]) == (1, "0.012300")
    html = client.get(reverse("judges:call_detail", args=[run.study.slug, run.pk, call.pk]))
    text = html.content.decode()
    assert '<td id="call-attempts">2</td>' in text
    assert f"claimed by a worker until {lease:%Y-%m-%d %H:%M:%S}" in text
    assert "1 request sent without a recorded reply" in text


def test_a_running_run_with_no_call_finished_for_long_asks_for_a_worker(
    client, cast, run, settings
):
    settings.CONCORD_JUDGE_STALL_SECONDS = 60
    long_ago = timezone.now() - timedelta(minutes=5)
    run.calls.update(finished_at=None)
    JudgeRun.objects.filter(pk=run.pk).update(started_at=long_ago)
    login(client, cast.researcher)
    stall = client.get(urls(run)[2]).json()["stall"]
    assert stall.startswith("No call finished since ")
    assert "celery -A config worker -Q llm_judge" in stall
