"""The Django admin: every page opens for an admin, lists stay at a fixed number of queries,
actions go through the services, and nobody but admins gets in."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import (
    Answer,
    ContrastSet,
    HumanJudgment,
    Pair,
    PayEntry,
    Preference,
    Prompt,
    Study,
    Worker,
)
from annotation.services.pairs import pairs_generate
from judges.models import (
    AnswerScore,
    ContrastScoring,
    Judge,
    JudgeCall,
    JudgeRun,
    ReferenceCall,
    template_hash,
)
from tests.conftest import PASSWORD, Cast
from tests.factories import make_assignment, make_pair, make_prompt_with_answers

OUR_APPS = ("annotation", "judges", "leaderboard")


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def rows(cast: Cast) -> Pair:
    """One row of every model the admin shows, hanging off one pair of the main study."""
    pair = make_pair(cast.study)
    Answer.objects.filter(pk=pair.answer_a_id).update(
        leak_flagged=True, leak_matches=["I am sys-a, made by Example"]
    )
    assignment = make_assignment(pair, cast.worker_one)
    judgment = HumanJudgment.objects.create(
        study=cast.study,
        pair=pair,
        worker=cast.worker_one,
        assignment=assignment,
        a_left=True,
        likert_shown=2,
        likert=2,
        preference=Preference.A,
    )
    PayEntry.objects.create(
        study=cast.study,
        worker=cast.worker_one,
        judgment=judgment,
        kind=PayEntry.Kind.JUDGMENT,
        amount_cents=15,
    )
    PayEntry.objects.create(
        study=cast.study, worker=cast.worker_two, kind=PayEntry.Kind.BONUS, amount_cents=250
    )
    judge = Judge.objects.create(
        name="gpt-judge",
        kind=Judge.Kind.LLM,
        model_name="gpt-4",
        api_key_env="CONCORD_JUDGE_KEY_TEST",
        prompt_template="Compare {answer_first} and {answer_second}.",
    )
    run = JudgeRun.objects.create(judge=judge, study=cast.study)
    run.pairs.add(pair)
    JudgeCall.objects.create(run=run, pair=pair, order=JudgeCall.Order.A_FIRST, raw_output="[[A]]")
    JudgeCall.objects.create(
        run=run, pair=pair, order=JudgeCall.Order.B_FIRST, status=JudgeCall.Status.FAILED
    )
    AnswerScore.objects.create(run=run, answer=pair.answer_a, score=0.5)
    ReferenceCall.objects.create(
        study=cast.study, prompt=pair.prompt, judge=judge, idempotency_key="admin-ref"
    )
    contrast_set = ContrastSet.objects.create(
        study=cast.study, low=0.75, high=0.9, best=ContrastSet.Best.FIRST_RANKED, backbone="b"
    )
    ContrastScoring.objects.create(
        run=run, contrast_set=contrast_set, status=ContrastScoring.Status.FAILED, error="gone"
    )
    return pair


def our_model_admins() -> list[tuple[type[Model], admin.ModelAdmin[Any]]]:
    return [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in OUR_APPS
    ]


def test_every_model_of_ours_is_in_the_admin() -> None:
    registered = {model.__name__ for model, _ in our_model_admins()}
    assert registered >= {
        "Study",
        "Prompt",
        "System",
        "Answer",
        "Pair",
        "Worker",
        "Assignment",
        "HumanJudgment",
        "PayEntry",
        "Judge",
        "JudgeRun",
        "JudgeCall",
    }


def test_an_admin_opens_every_list_change_and_add_page(cast: Cast, rows: Pair) -> None:
    client = client_for(cast.admin)
    for model, model_admin in our_model_admins():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        response = client.get(changelist)
        assert response.status_code == 200, meta.label

        if model_admin.search_fields:
            searched = client.get(changelist, {"q": "sys-a"})
            assert searched.status_code == 200, meta.label
            assert "?e=1" not in searched.get("Location", ""), meta.label

        cl: ChangeList = response.context["cl"]
        for spec in cl.filter_specs:
            choice = next(c for c in spec.choices(cl) if not c["selected"])
            filtered = client.get(changelist + str(choice["query_string"]))
            assert filtered.status_code == 200, (meta.label, choice["query_string"])

        obj = model._default_manager.order_by("pk").first()
        assert obj is not None, f"the fixture has no {meta.label}"
        change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
        assert client.get(change).status_code == 200, meta.label

        add = reverse(f"admin:{meta.app_label}_{meta.model_name}_add")
        expected = 200 if model_admin.has_add_permission(response.wsgi_request) else 403
        assert client.get(add).status_code == expected, meta.label


def test_a_search_finds_prompts_by_the_text_of_their_turns(cast: Cast, rows: Pair) -> None:
    Prompt.objects.create(study=cast.study, external_id="q-77", turns=["Explain tidal locking."])
    client = client_for(cast.admin)
    response = client.get(reverse("admin:annotation_prompt_changelist"), {"q": "tidal"})
    assert [prompt.external_id for prompt in response.context["cl"].result_list] == ["q-77"]


def study_changelist_queries(client: Client) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("admin:annotation_study_changelist"))
    assert response.status_code == 200
    return len(queries.captured_queries), response.context["cl"].result_count


def test_the_study_list_takes_the_same_queries_for_2_or_20_studies(cast: Cast) -> None:
    client = client_for(cast.admin)
    few, shown = study_changelist_queries(client)
    assert shown == 2
    for index in range(18):
        study = Study.objects.create(slug=f"s-{index}", name=f"Study {index}")
        make_pair(study)
    many, shown = study_changelist_queries(client)
    assert shown == 20
    assert many == few


@pytest.mark.parametrize(
    "name", ["annotation_pair", "annotation_answer", "annotation_prompt", "judges_judgecall"]
)
def test_lists_of_pairs_answers_and_calls_take_the_same_queries_for_more_rows(
    cast: Cast, rows: Pair, name: str
) -> None:
    client = client_for(cast.admin)
    url = reverse(f"admin:{name}_changelist")
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    run = JudgeRun.objects.get()
    for index in range(5):
        pair = make_pair(cast.study, external_id=f"more-{index}")
        JudgeCall.objects.create(run=run, pair=pair, order=JudgeCall.Order.A_FIRST)
    with CaptureQueriesContext(connection) as many:
        response = client.get(url)
    assert response.context["cl"].result_count > 5
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_study_list_shows_counts_and_pay_in_dollars(cast: Cast, rows: Pair) -> None:
    cast.study.pay_per_judgment_cents = 125
    cast.study.save()
    response = client_for(cast.admin).get(reverse("admin:annotation_study_changelist"))
    main = next(s for s in response.context["cl"].result_list if s.pk == cast.study.pk)
    assert (main.prompt_count, main.pair_count, main.judgment_count) == (1, 1, 1)
    assert "$1.25" in response.content.decode()


@pytest.mark.parametrize(
    "url", ["/admin/", "/admin/annotation/study/", "/admin/annotation/answer/"]
)
def test_a_researcher_cannot_reach_the_admin(cast: Cast, url: str) -> None:
    response = client_for(cast.researcher).get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_the_clear_leak_action_records_who_and_when(cast: Cast, rows: Pair) -> None:
    flagged = Answer.objects.get(pk=rows.answer_a_id)
    untouched = Answer.objects.get(pk=rows.answer_b_id)
    response = client_for(cast.admin).post(
        reverse("admin:annotation_answer_changelist"),
        {"action": "clear_leak_flag", "_selected_action": [flagged.pk, untouched.pk]},
        follow=True,
    )
    assert "Cleared 1 flagged answers" in response.content.decode()
    flagged.refresh_from_db()
    untouched.refresh_from_db()
    assert flagged.leak_cleared_by == cast.admin
    assert flagged.leak_cleared_at is not None
    assert flagged.leak_flagged and flagged.usable_in_pairs
    assert untouched.leak_cleared_at is None and untouched.leak_cleared_by is None


def test_an_answer_cleared_in_the_admin_joins_the_next_pair_generation(cast: Cast) -> None:
    prompt, answers = make_prompt_with_answers(cast.study, "leaky", ("sys-a", "sys-b", "sys-c"))
    Answer.objects.filter(pk=answers[2].pk).update(leak_flagged=True)
    assert pairs_generate(study=cast.study, strategy="all").created == 1
    client_for(cast.admin).post(
        reverse("admin:annotation_answer_changelist"),
        {"action": "clear_leak_flag", "_selected_action": [answers[2].pk]},
    )
    assert pairs_generate(study=cast.study, strategy="all").created == 2
    assert Pair.objects.filter(prompt=prompt).count() == 3


def test_study_actions_set_live_pause_and_close(cast: Cast) -> None:
    client = client_for(cast.admin)
    changelist = reverse("admin:annotation_study_changelist")

    def act(action: str) -> None:
        client.post(changelist, {"action": action, "_selected_action": [cast.other_study.pk]})
        cast.other_study.refresh_from_db()

    act("make_live")
    assert cast.other_study.status == Study.Status.LIVE
    act("make_paused")
    assert cast.other_study.status == Study.Status.PAUSED
    act("make_closed")
    assert cast.other_study.status == Study.Status.CLOSED
    act("make_live")
    assert cast.other_study.status == Study.Status.CLOSED, "a closed study stays closed"


def test_worker_actions_block_and_unblock(cast: Cast) -> None:
    client = client_for(cast.admin)
    changelist = reverse("admin:annotation_worker_changelist")
    selected = [cast.worker_one.pk]
    client.post(changelist, {"action": "block", "_selected_action": selected})
    cast.worker_one.refresh_from_db()
    cast.worker_two.refresh_from_db()
    assert cast.worker_one.state == Worker.State.BLOCKED
    assert cast.worker_two.state == Worker.State.ACTIVE
    client.post(changelist, {"action": "unblock", "_selected_action": selected})
    cast.worker_one.refresh_from_db()
    assert cast.worker_one.state == Worker.State.ACTIVE


def test_the_pay_list_sums_the_filtered_entries(cast: Cast, rows: Pair) -> None:
    client = client_for(cast.admin)
    changelist = reverse("admin:annotation_payentry_changelist")
    assert "<strong>$2.65</strong>" in client.get(changelist).content.decode()
    bonuses = client.get(changelist, {"kind__exact": "bonus"}).content.decode()
    assert "<strong>$2.50</strong>" in bonuses


def test_judgments_and_judge_calls_are_read_only(cast: Cast, rows: Pair) -> None:
    client = client_for(cast.admin)
    judgment = HumanJudgment.objects.get()
    url = reverse("admin:annotation_humanjudgment_change", args=[judgment.pk])
    client.post(url, {"likert": 8, "likert_shown": 8, "preference": "B"})
    judgment.refresh_from_db()
    assert judgment.likert == 2
    call = JudgeCall.objects.order_by("pk").first()
    assert call is not None
    response = client.get(reverse("admin:judges_judgecall_change", args=[call.pk]))
    assert b'name="raw_output"' not in response.content


def test_judge_runs_count_their_calls_by_status(cast: Cast, rows: Pair) -> None:
    response = client_for(cast.admin).get(reverse("admin:judges_judgerun_changelist"))
    (run,) = response.context["cl"].result_list
    assert (run.calls_pending_n, run.calls_failed_n, run.calls_done_n) == (1, 1, 0)


def test_saving_a_judge_sets_its_template_hash_and_never_shows_the_key(
    cast: Cast, rows: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONCORD_JUDGE_KEY_TEST", "sk-very-secret-value")
    # A judge with no runs yet: one with runs keeps its template (tests/judges/test_admin.py).
    judge = Judge.objects.create(
        name="fresh-judge",
        kind=Judge.Kind.LLM,
        model_name="gpt-4",
        api_key_env="CONCORD_JUDGE_KEY_TEST",
        prompt_template="Compare {answer_first} and {answer_second}.",
    )
    client = client_for(cast.admin)
    url = reverse("admin:judges_judge_change", args=[judge.pk])
    page = client.get(url).content.decode()
    assert "CONCORD_JUDGE_KEY_TEST" in page
    assert "sk-very-secret-value" not in page
    form = {
        "name": "fresh-judge",
        "kind": "llm",
        "model_name": "gpt-4",
        "model_version": "0613",
        "order_policy": "both",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "CONCORD_JUDGE_KEY_TEST",
        "prompt_template": "Which is better, {answer_first} or {answer_second}?",
        "output_format": "likert",
        "start_from": "",
        "params": "{}",
        "price_input_per_mtok": "30",
        "price_output_per_mtok": "60",
        "requests_per_minute": "",
        "tokens_per_minute": "",
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    judge.refresh_from_db()
    assert judge.template_hash == template_hash(
        "Which is better, {answer_first} or {answer_second}?"
    )
    assert judge.price_input_per_mtok == Decimal("30")
