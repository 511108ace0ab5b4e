"""The shipped templates and their rendering."""

from __future__ import annotations

import pytest

from judges.llm import baselines
from judges.llm.parsing import likert_parse
from judges.llm.prompts import TEMPLATES, question_render, template_render


def test_six_templates_ship_one_per_output_format_kind():
    assert set(TEMPLATES) == {
        "likert",
        "likert_no_position",
        "two_scores",
        "verdict",
        "values",
        "grade",
    }
    assert "Do not favour a reply because it comes first" in TEMPLATES["likert_no_position"].text
    assert "Do not favour" not in TEMPLATES["likert"].text


@pytest.mark.parametrize("name", sorted(set(TEMPLATES) - {"grade"}))
def test_every_pairwise_template_shows_the_question_and_both_answers(name):
    text = template_render(
        TEMPLATES[name].text, question="Q-TEXT", answer_first="FIRST-TEXT", answer_second="SEC"
    )
    assert "Q-TEXT" in text and "FIRST-TEXT" in text and "SEC" in text
    assert "{question}" not in text and "{answer_first}" not in text


def test_values_template_lists_the_seven_values():
    text = template_render(
        TEMPLATES["values"].text, question="q", answer_first="a", answer_second="b"
    )
    for key in ("relevance", "actionability", "empathy", "creativity", "clarity", "ethics"):
        assert f"\n{key}: " in text


def test_braces_that_are_not_variables_stay_as_written():
    text = template_render(
        'Reply as {"score": N}. {question}', question="Why?", answer_first="", answer_second=""
    )
    assert text == 'Reply as {"score": N}. Why?'


def test_a_multi_turn_question_numbers_its_turns_up_to_the_judged_turn():
    assert question_render(["one", "two", "three"], 2) == "(Turn 1) one\n\n(Turn 2) two"


def test_random_baseline_is_the_same_for_the_same_seed_pair_and_order():
    first = baselines.random_reply(seed=7, pair_id=3, order="ab")
    assert first == baselines.random_reply(seed=7, pair_id=3, order="ab")
    draws = {baselines.random_reply(seed=seed, pair_id=3, order="ab") for seed in range(40)}
    assert len(draws) > 4
    assert likert_parse(first).ok


def test_longer_baseline_prefers_the_longer_answer_in_the_order_shown():
    assert (
        likert_parse(baselines.longer_reply(first="long answer", second="short")).likert_shown == 2
    )
    assert (
        likert_parse(baselines.longer_reply(first="short", second="long answer")).likert_shown == 7
    )
    assert likert_parse(baselines.longer_reply(first="same", second="same")).likert_shown == 4


def test_the_grading_template_shows_the_question_and_its_one_answer():
    text = template_render(TEMPLATES["grade"].text, question="Q-TEXT", answer="THE-ANSWER")
    assert "Q-TEXT" in text and "THE-ANSWER" in text
    assert "{answer}" not in text and "Reference" not in text and "{reference}" not in text


@pytest.mark.parametrize("name", ["grade", "likert"])
def test_a_reference_variant_shows_the_reference_where_the_plain_one_does_not(name):
    reference = TEMPLATES[name].reference_text
    assert "{reference}" in reference and "{reference}" not in TEMPLATES[name].text
    text = template_render(
        reference, question="q", answer="a", answer_first="f", answer_second="s", reference="REF"
    )
    assert "Reference answer:\n<<<\nREF\n>>>" in text


# What each reply format's instruction says, in every variant of a template of that format: a
# variant that asked for another format would be parsed as the plain template's and fail.
FORMAT_WORDS = {
    "likert": "as a single digit, on the first line",
    "two_scores": "separated by one space (for example: 7 4)",
    "verdict": "[[A]] if assistant A",
    "values": "On the first line write FIRST or SECOND",
    "grade": "as a whole number from 1 to 10, on the first line",
}


def test_the_shipped_variants_are_the_documented_ones():
    assert {name for name, t in TEMPLATES.items() if t.reference_text} == {
        "likert",
        "two_scores",
        "verdict",
        "grade",
    }
    assert {name for name, t in TEMPLATES.items() if t.multi_turn_text} == {
        "likert",
        "two_scores",
        "verdict",
        "values",
        "grade",
    }


@pytest.mark.parametrize("name", sorted(name for name, t in TEMPLATES.items() if t.reference_text))
def test_every_reference_variant_shows_the_reference_and_asks_for_its_format(name):
    template = TEMPLATES[name]
    text = template_render(
        template.reference_text,
        question="Q-TEXT",
        answer="ONE",
        answer_first="FIRST-TEXT",
        answer_second="SEC",
        reference="REF-TEXT",
    )
    assert "REF-TEXT" in text and "Q-TEXT" in text and "{" + "reference}" not in text
    assert ("ONE" in text) if name == "grade" else ("FIRST-TEXT" in text and "SEC" in text)
    assert FORMAT_WORDS[template.output_format] in " ".join(text.split())


@pytest.mark.parametrize("name", sorted(name for name, t in TEMPLATES.items() if t.multi_turn_text))
def test_every_multi_turn_variant_shows_the_conversation_and_asks_for_its_format(name):
    template = TEMPLATES[name]
    assert "{conversation}" in template.multi_turn_text and "{turn}" in template.multi_turn_text
    text = template_render(
        template.multi_turn_text, question="", conversation="CONVERSATION-TEXT", turn=2
    )
    assert "CONVERSATION-TEXT" in text and "turn 2" in text and "{turn}" not in text
    assert FORMAT_WORDS[template.output_format] in " ".join(text.split())
