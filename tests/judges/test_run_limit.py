"""A study's limit on judge runs queued or running at once (CONCORD_STUDY_MAX_ACTIVE_RUNS).

Twenty runs started together on one study were all accepted (13,440 calls): now a start past the
limit is refused with the runs that hold the places, and two starts at once cannot both take the
last place (the count is made under the study row's lock).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import LazySettings
from django.db import connection
from django.urls import reverse

from annotation.models import Study
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.limits import RunLimitReached
from judges.services.panels import panel_create, panel_run_combine
from judges.services.runs import (
    judge_run_cancel,
    judge_run_create,
    judge_run_resume,
    judge_run_start,
)
from tests.conftest import PASSWORD, Cast
from tests.judges.conftest import make_llm_judge, make_marked_pairs
from tests.judges.fake_openai import FakeOpenAI


def test_the_default_limit_is_three_runs(settings: LazySettings) -> None:
    assert settings.CONCORD_STUDY_MAX_ACTIVE_RUNS == 3


@pytest.mark.django_db
def test_a_fourth_run_is_refused_naming_the_three_that_hold_the_places(
    cast: Cast, fake: FakeOpenAI, api_key: str
) -> None:
    make_marked_pairs(cast.study, 2)
    judge = make_llm_judge(fake)
    runs = [judge_run_start(judge=judge, study=cast.study, user=cast.researcher) for _ in range(3)]
    JudgeRun.objects.filter(pk=runs[0].pk).update(status=JudgeRun.Status.PENDING)
    with pytest.raises(RunLimitReached) as caught:
        judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    message = caught.value.messages[0]
    assert f"run {runs[0].pk} (gpt-fake, pending)" in message
    assert f"run {runs[1].pk} (gpt-fake, running), run {runs[2].pk} (gpt-fake, running)" in message
    assert "at most 3 at once (CONCORD_STUDY_MAX_ACTIVE_RUNS)" in message
    assert JudgeRun.objects.filter(study=cast.study).count() == 3
    # Another study's places are its own.
    make_marked_pairs(cast.other_study, 1)
    judge_run_start(judge=judge, study=cast.other_study, user=cast.admin)
    # A run that finished or was cancelled frees its place.
    JudgeRun.objects.filter(pk=runs[1].pk).update(status=JudgeRun.Status.DONE)
    judge_run_cancel(run=runs[2], user=cast.researcher)
    judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    with pytest.raises(RunLimitReached):
        judge_run_start(judge=judge, study=cast.study, user=cast.researcher)


@pytest.mark.django_db
def test_resuming_a_cancelled_run_needs_a_free_place(
    cast: Cast, fake: FakeOpenAI, api_key: str, settings: LazySettings
) -> None:
    settings.CONCORD_STUDY_MAX_ACTIVE_RUNS = 1
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake)
    first = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    judge_run_cancel(run=first, user=cast.researcher)
    second = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    with pytest.raises(RunLimitReached, match=f"run {second.pk} "):
        judge_run_resume(run=first, user=cast.researcher)
    first.refresh_from_db()
    assert first.status == JudgeRun.Status.CANCELLED
    judge_run_cancel(run=second, user=cast.researcher)
    assert judge_run_resume(run=first, user=cast.researcher).status == JudgeRun.Status.RUNNING


@pytest.mark.django_db
def test_a_pl_judges_run_takes_a_place_too(
    cast: Cast, fake: FakeOpenAI, api_key: str, settings: LazySettings
) -> None:
    settings.CONCORD_STUDY_MAX_ACTIVE_RUNS = 1
    make_marked_pairs(cast.study, 1)
    running = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    pl_judge = Judge.objects.create(name="pl-x", kind=Judge.Kind.PL, model_name="pl")
    with pytest.raises(RunLimitReached, match=f"run {running.pk} "):
        judge_run_create(judge=pl_judge, study=cast.study, user=cast.researcher)
    assert JudgeRun.objects.filter(judge=pl_judge).count() == 0


@pytest.mark.django_db
def test_the_run_page_answers_409_with_the_runs_named(
    client, cast: Cast, fake: FakeOpenAI, api_key: str, settings: LazySettings
) -> None:
    settings.CONCORD_STUDY_MAX_ACTIVE_RUNS = 1
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake)
    running = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    response = client.post(reverse("judges:run_list", args=[cast.study.slug]), {"judge": judge.pk})
    assert response.status_code == 409
    assert f"run {running.pk} (gpt-fake, running)" in response.content.decode()
    assert JudgeRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_eight_starts_at_once_with_three_places_make_exactly_three_runs(
    cast: Cast, fake: FakeOpenAI, api_key: str
) -> None:
    make_marked_pairs(cast.study, 40)
    judge = make_llm_judge(fake)
    start = threading.Barrier(8)

    def one_start() -> str:
        try:
            start.wait()
            judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
            return "started"
        except RunLimitReached:
            return "refused"
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = sorted(pool.map(lambda _: one_start(), range(8)))
    assert outcomes == ["refused"] * 5 + ["started"] * 3
    assert JudgeRun.objects.filter(study=cast.study).count() == 3


def _panel_of_two_done_members(study: Study) -> Judge:
    """A majority panel of two judges, each with a done run on one pair of `study`."""
    pair = make_marked_pairs(study, 1)[0]
    members = []
    for name in ("m1", "m2"):
        member = Judge.objects.create(name=name, kind=Judge.Kind.LLM, study=study)
        run = JudgeRun.objects.create(judge=member, study=study, status=JudgeRun.Status.DONE)
        run.pairs.set([pair])
        JudgeCall.objects.create(
            run=run, pair=pair, order=JudgeCall.Order.A_FIRST, status="done", preference="A"
        )
        members.append(member)
    return panel_create(name="jury", study=study, members=members, rule="majority")


@pytest.mark.django_db
def test_a_panel_run_takes_a_place_until_it_is_combined(
    cast: Cast, fake: FakeOpenAI, api_key: str, settings: LazySettings
) -> None:
    settings.CONCORD_STUDY_MAX_ACTIVE_RUNS = 1
    panel = _panel_of_two_done_members(cast.study)
    llm = make_llm_judge(fake)
    running = judge_run_start(judge=llm, study=cast.study, user=cast.researcher)
    # A panel start past the limit is refused, naming the run that holds the place.
    with pytest.raises(RunLimitReached, match=f"run {running.pk} "):
        judge_run_start(judge=panel, study=cast.study, user=cast.researcher)
    assert JudgeRun.objects.filter(judge=panel).count() == 0
    judge_run_cancel(run=running, user=cast.researcher)
    combined = judge_run_start(judge=panel, study=cast.study, user=cast.researcher)
    # While its combination waits for a worker, the panel run holds the place.
    with pytest.raises(RunLimitReached, match=f"run {combined.pk} \\(jury, running\\)"):
        judge_run_start(judge=llm, study=cast.study, user=cast.researcher)
    assert panel_run_combine(run_id=combined.pk) == 1
    judge_run_start(judge=llm, study=cast.study, user=cast.researcher)


@pytest.mark.django_db(transaction=True)
def test_eight_panel_starts_at_once_with_three_places_make_exactly_three_runs(
    cast: Cast, fake: FakeOpenAI, api_key: str
) -> None:
    panel = _panel_of_two_done_members(cast.study)
    start = threading.Barrier(8)

    def one_start() -> str:
        try:
            start.wait()
            judge_run_start(judge=panel, study=cast.study, user=cast.researcher)
            return "started"
        except RunLimitReached:
            return "refused"
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = sorted(pool.map(lambda _: one_start(), range(8)))
    assert outcomes == ["refused"] * 5 + ["started"] * 3
    assert JudgeRun.objects.filter(judge=panel).count() == 3
