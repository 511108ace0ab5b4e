"""The demo study loads cleanly and exercises what the demo is meant to show."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Q
from django.test import Client

from annotation.models import Answer, Pair, Prompt
from annotation.services.demo import demo_setup
from judges.models import Judge
from judges.services.judges import judge_readiness


@pytest.mark.django_db
def test_the_demo_study_flags_exactly_its_two_planted_identity_leaks() -> None:
    setup = demo_setup()
    flagged = Answer.objects.filter(prompt__study=setup.study, leak_flagged=True)
    assert sorted((a.prompt.external_id, a.system.name) for a in flagged) == [
        ("demo-026", "cobalt-chat"),
        ("demo-029", "dune-7b"),
    ]


@pytest.mark.django_db
def test_the_demo_study_has_its_prompts_categories_and_gold_pairs() -> None:
    setup = demo_setup()
    prompts = Prompt.objects.filter(study=setup.study)
    assert prompts.count() == 34
    assert len(set(prompts.values_list("category", flat=True))) == 8
    assert set(setup.study.systems.values_list("name", flat=True)) == {
        "atlas-large",
        "breeze-mini",
        "cobalt-chat",
        "dune-7b",
    }
    # 34 prompts x 6 system pairs at the last turn, less the pairs of the two flagged answers.
    assert setup.pairs.created == 34 * 6 - 2 * 3
    gold = Pair.objects.filter(study=setup.study, is_gold=True)
    assert gold.exists()
    assert set(gold.values_list("prompt__category", flat=True)) == {"advice"}
    flagged_in_pairs = Pair.objects.filter(study=setup.study).filter(
        Q(answer_a__leak_flagged=True) | Q(answer_b__leak_flagged=True)
    )
    assert not flagged_in_pairs.exists()


@pytest.mark.django_db
def test_the_demo_researcher_gives_the_llm_judge_its_key_on_its_page_without_a_restart(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = io.StringIO()
    call_command("demo_setup", "--base-url", "http://127.0.0.1:8000", stdout=out)
    judge = Judge.objects.get(name="gpt-4 (H4 Likert)")
    page = f"/studies/demo/judges/{judge.pk}/"
    assert f"paste it on its page (stored encrypted; no restart): http://127.0.0.1:8000{page}" in (
        out.getvalue()
    )
    assert judge_readiness(judge=judge) == "not configured: set OPENAI_API_KEY"
    client.force_login(User.objects.get(username="demo-researcher"))
    assert client.get(page).status_code == 200
    response = client.post(page + "key/", {"api_key": "sk-demo-" + "x" * 40})
    assert response.status_code == 302
    judge.refresh_from_db()
    assert judge_readiness(judge=judge) == ""
    assert judge.api_key_encrypted and "sk-demo-" not in judge.api_key_encrypted
    # Loading the demo again keeps the judge and its key.
    call_command("demo_setup", stdout=io.StringIO())
    again = Judge.objects.get(name="gpt-4 (H4 Likert)")
    assert (again.pk, again.api_key_encrypted) == (judge.pk, judge.api_key_encrypted)


@pytest.mark.django_db
def test_the_demo_has_a_grading_judge_that_reads_references_in_math_only() -> None:
    from judges.services.demo import DEMO_PANEL, demo_judges_ensure

    setup = demo_setup()
    assert setup.study.reference_categories == ["math"]
    math = Prompt.objects.filter(study=setup.study, category="math")
    assert math.count() == 5
    assert all(p.reference_turns and len(p.reference_turns) == len(p.turns) for p in math)
    others = Prompt.objects.filter(study=setup.study).exclude(category="math")
    assert not any(p.reference_turns for p in others)
    judges = {j.name: j for j in demo_judges_ensure(study=setup.study)}
    grader = judges["gpt-4 (single grade, reference for math)"]
    assert (grader.output_format, grader.study) == ("grade", setup.study)
    assert "{reference}" in grader.reference_template
    # The jury keeps its three members; the grader is not one of them.
    panel = judges[DEMO_PANEL]
    assert "gpt-4 (single grade, reference for math)" not in {
        s.member.name for s in panel.panel_members.all()
    }
