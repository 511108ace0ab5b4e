"""A researcher's own templates in the browser: edit them, preview the prompt as it would be sent
on a real pair of the study, check a sample reply against the reply format; nothing is paid."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, Pair, Prompt
from annotation.roles import Role
from annotation.services.roles import study_member_add
from judges.llm.prompts import LIKERT
from judges.models import Judge, JudgeCall, template_hash
from judges.services.calls import call_messages
from judges.services.judges import judge_create
from judges.services.runs import judge_run_start
from tests.conftest import Cast, make_user
from tests.judges.conftest import KEY_ENV, make_llm_judge, make_marked_pairs
from tests.judges.fake_openai import FakeOpenAI
from tests.judges.test_judge_pages import client_for
from tests.judges.test_multi_turn import Q2, X, Y, two_turn_study

pytestmark = pytest.mark.django_db

MY_TEMPLATE = (
    "Which reply is better?\nQ: {question}\nFirst: {answer_first}\nSecond: {answer_second}\n"
    "Write a score 1-8 on the first line."
)


def page_url(judge: Judge, slug: str = "main-study") -> str:
    return reverse("judges:judge_templates", args=[slug, judge.pk])


def previews(page: str) -> list[str]:
    """The texts of the preview's boxes, unescaped, in page order."""
    return [
        html.unescape(text) for text in re.findall(r'<pre class="pre-wrap">(.*?)</pre>', page, re.S)
    ]


def form(judge: Judge, **changes: str) -> dict[str, str]:
    data = {
        "prompt_template": judge.prompt_template,
        "reference_template": judge.reference_template,
        "multi_turn_template": judge.multi_turn_template,
        "output_format": judge.output_format,
        "pair": "",
        "sample_reply": "",
        "new_name": "",
        "action": "preview",
    }
    data.update(changes)
    return data


def test_the_preview_is_what_the_calls_of_a_run_send_in_both_orders(
    cast: Cast, fake: FakeOpenAI, api_key: str
) -> None:
    pairs = make_marked_pairs(cast.study, 2)
    judge = make_llm_judge(fake, study=cast.study)
    client = client_for(cast.researcher)
    page = client.get(page_url(judge) + f"?pair={pairs[1].pk}").content.decode()
    shown = previews(page)
    assert len(shown) == 2 and "Turn 1, A shown first" in page and "Turn 1, B shown first" in page
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher, pairs=[pairs[1]])
    sent = {
        call.order: call_messages(call=call)[0]["content"]
        for call in run.calls.select_related("pair")
    }
    assert shown == [sent[JudgeCall.Order.A_FIRST], sent[JudgeCall.Order.B_FIRST]]
    assert f"(ref {cast.study.slug}.p1-A)" in shown[0]
    assert fake.requests() == {}  # the preview asked nothing of the judge's API


def test_a_researcher_edits_the_template_and_sees_the_draft_before_saving_it(
    cast: Cast, fake: FakeOpenAI
) -> None:
    (pair,) = make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake, study=cast.study, order_policy=Judge.OrderPolicy.FIXED)
    client = client_for(cast.researcher)
    page = client.post(page_url(judge), form(judge, prompt_template=MY_TEMPLATE)).content.decode()
    (shown,) = previews(page)  # a fixed order: A first only
    assert shown.startswith("Which reply is better?\nQ: Question 0?\nFirst: A short answer")
    judge.refresh_from_db()
    assert judge.prompt_template == LIKERT.text  # a preview saves nothing
    saving = form(judge, prompt_template=MY_TEMPLATE.replace("\n", "\r\n"), action="save")
    assert client.post(page_url(judge), saving).status_code == 302
    judge.refresh_from_db()
    assert judge.prompt_template == MY_TEMPLATE
    assert judge.template_hash == template_hash(judge.prompt_template)


def test_unknown_variables_and_bad_braces_are_named(cast: Cast, fake: FakeOpenAI) -> None:
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake, study=cast.study)
    client = client_for(cast.researcher)
    broken = "Q: {questoin}\nFirst: {{answer_first}}\nSecond: {answer_second\n{reference}"
    response = client.post(page_url(judge), form(judge, prompt_template=broken, action="save"))
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "Line 1: unknown variable {questoin}; did you mean {question}?" in page
    assert "'{{answer_first}}' is not filled in; write the variable answer_first as" in page
    assert "Line 3: the variable answer_second lacks its closing brace" in page
    assert "Line 4: {reference} is not given to this template" in page
    judge.refresh_from_db()
    assert judge.prompt_template == LIKERT.text


def test_the_reply_format_check_shows_what_the_parser_reads_or_its_error(
    cast: Cast, fake: FakeOpenAI
) -> None:
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake, study=cast.study)
    client = client_for(cast.researcher)
    page = client.post(page_url(judge), form(judge, sample_reply="3\nThe first is a bit better."))
    text = html.unescape(page.content.decode())
    assert "The reply parses." in text and "<th>Likert as shown</th><td>3</td>" in text
    assert "Stored when A shown first</th><td>preference A, Likert 3" in text
    assert "Stored when B shown first</th><td>preference B, Likert 6" in text
    page = client.post(page_url(judge), form(judge, sample_reply="Between 3 and 4, I'd say."))
    text = html.unescape(page.content.decode())
    assert "The reply does not parse: no score on the first line" not in text
    assert "The reply does not parse: more than one number on the first line" in text
    verdict = client.post(
        page_url(judge), form(judge, output_format="verdict", sample_reply="Both fine. [[C]]")
    )
    assert '<td id="reply-winner">tie</td>' in verdict.content.decode()


def test_answers_and_sample_replies_are_escaped_in_the_page(cast: Cast, fake: FakeOpenAI) -> None:
    (pair,) = make_marked_pairs(cast.study, 1)
    Answer.objects.filter(pk=pair.answer_a_id).update(turns=["<script>alert('x')</script>"])
    judge = make_llm_judge(fake, study=cast.study)
    client = client_for(cast.researcher)
    page = client.post(
        page_url(judge), form(judge, sample_reply="<img src=x onerror=alert(1)>")
    ).content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_reference_category_pair_previews_the_reference_template(
    cast: Cast, fake: FakeOpenAI
) -> None:
    (pair,) = make_marked_pairs(cast.study, 1)
    cast.study.reference_categories = ["advice"]
    cast.study.save(update_fields=["reference_categories"])
    judge = make_llm_judge(fake, study=cast.study, reference_guided=True)
    client = client_for(cast.researcher)
    page = client.get(page_url(judge)).content.decode()
    assert "Cannot be rendered: prompt &#x27;main-study.p0&#x27; has no reference answer" in page
    Prompt.objects.filter(pk=pair.prompt_id).update(reference_turns=["The known answer."])
    page = client.get(page_url(judge)).content.decode()
    assert page.count("reference template</span>") == 2
    assert all("Reference answer:\n<<<\nThe known answer.\n>>>" in text for text in previews(page))


def test_a_judge_of_every_turn_previews_turn_two_with_the_conversation(
    cast: Cast, fake: FakeOpenAI
) -> None:
    _, _, (pair,) = two_turn_study(cast.study, turns=(1,))
    judge = make_llm_judge(fake, study=cast.study, multi_turn=True, turns="each")
    page = client_for(cast.researcher).get(page_url(judge)).content.decode()
    shown = previews(page)
    assert len(shown) == 4 and page.count("multi-turn template</span>") == 2
    assert "{conversation}" not in shown[2] and Q2 in shown[2]
    assert shown[2].index(X[1]) < shown[2].index(Y[1])  # A first
    assert shown[3].index(Y[1]) < shown[3].index(X[1])  # B first
    assert Q2 not in shown[0]


def test_a_grading_judge_previews_each_answer_alone(cast: Cast, fake: FakeOpenAI) -> None:
    (pair,) = make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake, study=cast.study, template="grade")
    page = client_for(cast.researcher).get(page_url(judge)).content.decode()
    first, second = previews(page)
    assert "(ref main-study.p0-A)" in first and "(ref main-study.p0-B)" not in first
    assert "(ref main-study.p0-B)" in second
    both = client_for(cast.researcher).post(
        page_url(judge), form(judge, output_format="likert", action="save")
    )
    assert both.status_code == 400 and "switching between them" in both.content.decode()


def test_a_judge_with_runs_keeps_its_templates_and_the_edit_becomes_a_new_judge(
    cast: Cast, fake: FakeOpenAI, api_key: str
) -> None:
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake, study=cast.study)
    judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    client = client_for(cast.researcher)
    page = client.get(page_url(judge)).content.decode()
    assert "This judge has 1 run" in page and 'id="save-templates"' not in page
    refused = client.post(page_url(judge), form(judge, prompt_template=MY_TEMPLATE, action="save"))
    assert refused.status_code == 400 and "Save the edited templates as a new judge" in (
        refused.content.decode()
    )
    judge.refresh_from_db()
    assert judge.prompt_template == LIKERT.text
    copied = client.post(
        page_url(judge),
        form(judge, prompt_template=MY_TEMPLATE, action="copy", new_name="gpt-fake v2"),
    )
    new = Judge.objects.get(name="gpt-fake v2")
    assert copied["Location"].startswith(page_url(new))
    assert new.study == cast.study and new.api_key_env == KEY_ENV and new.base_url == fake.base_url
    assert new.prompt_template == MY_TEMPLATE and not new.runs.exists()
    assert new.template_hash != judge.template_hash
    judge.refresh_from_db()
    assert judge.prompt_template == LIKERT.text


def test_who_may_open_and_save_the_templates_page(cast: Cast, fake: FakeOpenAI) -> None:
    make_marked_pairs(cast.study, 1)
    judge = make_llm_judge(fake, study=cast.study)
    stranger = make_user("sam-researcher", Role.RESEARCHER)
    study_member_add(study=cast.other_study, user=stranger)
    annotator = cast.worker_one.user
    assert annotator is not None
    assert client_for(cast.researcher).get(page_url(judge)).status_code == 200
    assert client_for(cast.admin).get(page_url(judge)).status_code == 200
    for user in (stranger, annotator, cast.outsider):
        client = client_for(user)
        assert client.get(page_url(judge)).status_code == 404
        saving = form(judge, prompt_template=MY_TEMPLATE, action="save")
        assert client.post(page_url(judge), saving).status_code == 404
    # Another study's researcher cannot reach the judge through their own study either.
    other = client_for(stranger)
    assert other.get(page_url(judge, slug=cast.other_study.slug)).status_code == 404
    assert Client().get(page_url(judge)).status_code == 302  # to the login page
    judge.refresh_from_db()
    assert judge.prompt_template == LIKERT.text


def test_an_admins_shared_judge_is_previewed_but_not_saved_here(
    cast: Cast, fake: FakeOpenAI
) -> None:
    make_marked_pairs(cast.study, 1)
    shared = judge_create(
        name="shared",
        kind=Judge.Kind.LLM,
        model_name="gpt-4-fake",
        base_url=fake.base_url,
        api_key_env=KEY_ENV,
        template_name="likert",
    )
    client = client_for(cast.researcher)
    page = client.get(page_url(shared)).content.decode()
    assert len(previews(page)) == 2 and "changed in the admin" in page
    assert 'id="save-templates"' not in page and 'id="copy-judge"' not in page
    response = client.post(
        page_url(shared), form(shared, prompt_template=MY_TEMPLATE, action="save")
    )
    assert response.status_code == 404


def test_a_pair_of_another_study_is_not_previewed(cast: Cast, fake: FakeOpenAI) -> None:
    make_marked_pairs(cast.study, 1)
    (foreign,) = make_marked_pairs(cast.other_study, 1)
    judge = make_llm_judge(fake, study=cast.study)
    page = client_for(cast.researcher).get(page_url(judge) + f"?pair={foreign.pk}")
    assert page.status_code == 200
    shown = previews(page.content.decode())
    assert shown and all("(ref main-study.p0-A)" in text for text in shown)
    assert not any("other-study" in text for text in shown)
    assert Pair.objects.filter(study=cast.study).count() == 1
