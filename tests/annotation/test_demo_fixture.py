"""The demo study loads cleanly and exercises what the demo is meant to show."""

from __future__ import annotations

import pytest
from django.db.models import Q

from annotation.models import Answer, Pair, Prompt
from annotation.services.demo import demo_setup


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
