"""Admins configure judges in the admin; unsafe base URLs are refused there with the reason."""

from __future__ import annotations

import pytest
from django.urls import reverse

from judges.llm.prompts import TEMPLATES
from judges.models import Judge, JudgeRun, template_hash
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def form_data(**overrides):
    data = {
        "name": "gpt-4",
        "kind": "llm",
        "model_name": "gpt-4o",
        "model_version": "",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "prompt_template": "",
        "start_from": "likert_no_position",
        "output_format": "likert",
        "params": '{"temperature": 0, "max_tokens": 512}',
        "price_input_per_mtok": "2.5",
        "price_output_per_mtok": "10",
        "requests_per_minute": "500",
        "tokens_per_minute": "",
        "order_policy": "both",
    }
    data.update(overrides)
    return data


@pytest.fixture
def admin_client(client, cast):
    cast.admin.is_staff = True
    cast.admin.save()
    assert client.login(username=cast.admin.username, password=PASSWORD)
    return client


def test_an_admin_creates_a_judge_from_a_shipped_template_and_its_hash_is_kept(admin_client):
    response = admin_client.post(reverse("admin:judges_judge_add"), form_data())
    assert response.status_code == 302, response.content.decode()[:2000]
    judge = Judge.objects.get(name="gpt-4")
    assert judge.prompt_template == TEMPLATES["likert_no_position"].text
    assert judge.template_hash == template_hash(judge.prompt_template)


def test_the_admin_refuses_a_base_url_off_the_allow_list_and_says_why(admin_client):
    response = admin_client.post(
        reverse("admin:judges_judge_add"), form_data(base_url="http://169.254.169.254/v1")
    )
    assert response.status_code == 200
    assert "CONCORD_JUDGE_HOST_ALLOWLIST" in response.content.decode()
    assert not Judge.objects.exists()


def test_the_judge_list_shows_what_an_unconfigured_judge_needs(admin_client, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    admin_client.post(reverse("admin:judges_judge_add"), form_data())
    page = admin_client.get(reverse("admin:judges_judge_changelist")).content.decode()
    assert "not configured: set OPENAI_API_KEY" in page


def test_an_admin_seats_a_panels_members_and_a_nested_panel_is_refused(admin_client):
    from judges.models import PanelMember

    m1 = Judge.objects.create(name="m1", kind="random")
    m2 = Judge.objects.create(name="m2", kind="longer")
    inner = Judge.objects.create(name="inner", kind="panel", panel_rule="majority")
    panel = Judge.objects.create(name="jury", kind="panel", panel_rule="weighted")
    url = reverse("admin:judges_judge_change", args=[panel.pk])
    assert 'id="panel_members-group"' in admin_client.get(url).content.decode()

    def post(*seats):
        data = form_data(
            name="jury", kind="panel", panel_rule="weighted", base_url="", api_key_env=""
        ) | {
            "start_from": "",
            "panel_members-TOTAL_FORMS": str(len(seats)),
            "panel_members-INITIAL_FORMS": "0",
        }
        for i, (member, weight) in enumerate(seats):
            data |= {
                f"panel_members-{i}-member": str(member.pk),
                f"panel_members-{i}-weight": weight,
                f"panel_members-{i}-position": str(i),
            }
        return admin_client.post(url, data)

    refused = post((m1, "1"), (inner, "1"))
    assert refused.status_code == 200 and "cannot sit on a panel" in refused.content.decode()
    assert post((m1, "2"), (m2, "0")).status_code == 200  # a weight must be positive
    assert not PanelMember.objects.exists()
    saved = post((m1, "2"), (m2, "1"))
    assert saved.status_code == 302, saved.content.decode()[:3000]
    assert sorted(panel.panel_members.values_list("member__name", "weight")) == [
        ("m1", 2),
        ("m2", 1),
    ]


def test_the_admin_keeps_the_templates_of_a_judge_with_runs(admin_client, cast):
    admin_client.post(reverse("admin:judges_judge_add"), form_data())
    judge = Judge.objects.get(name="gpt-4")
    url = reverse("admin:judges_judge_change", args=[judge.pk])
    changed = form_data(prompt_template="Compare {answer_first} and {answer_second}.")
    JudgeRun.objects.create(judge=judge, study=cast.study)
    response = admin_client.post(url, changed)
    assert response.status_code == 200
    assert "This judge has runs" in response.content.decode()
    judge.refresh_from_db()
    assert judge.prompt_template == TEMPLATES["likert_no_position"].text
    renamed = form_data(prompt_template=judge.prompt_template, start_from="", name="gpt-4 old")
    assert admin_client.post(url, renamed).status_code == 302


def test_the_admin_refuses_a_template_with_a_misspelt_variable_and_names_it(admin_client):
    # A misspelt variable would be sent to the judge as empty text on every paid call.
    template = "Question: {questoin}\nFirst: {answer_first}\nSecond: {answer_second}"
    response = admin_client.post(
        reverse("admin:judges_judge_add"), form_data(prompt_template=template, start_from="")
    )
    assert response.status_code == 200
    assert "Line 1: unknown variable {questoin}; did you mean {question}?" in (
        response.content.decode()
    )
    assert not Judge.objects.exists()
