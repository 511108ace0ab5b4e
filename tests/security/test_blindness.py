"""The self-naming scan reads answers as the worker sees them: disguises do not get through."""

from __future__ import annotations

import pytest

from annotation.leakscan import scan_answer, worker_visible_text
from tests.security.selfnaming_corpus import DISGUISED, ORDINARY

# Measured on the corpora below: the phrase-list scan flagged 57 of 58 disguised self-namings
# (98.3%; the miss was "created by ~~nobody~~ Google DeepMind") and 0 of 60 ordinary answers; the
# relation scan of issue 27 flags 58 of 58 and 0 of 60.
MIN_FLAGGED = 0.95
MAX_FALSE_FLAGS = 0.05


def test_the_corpora_are_big_enough_to_mean_something() -> None:
    assert len(DISGUISED) >= 50 and len(ORDINARY) >= 50
    assert len(set(DISGUISED)) == len(DISGUISED)


def test_at_least_95_percent_of_disguised_self_namings_are_flagged() -> None:
    missed = [text for text in DISGUISED if not scan_answer(text)]
    rate = 1 - len(missed) / len(DISGUISED)
    print(
        f"self-naming corpus: {len(DISGUISED) - len(missed)}/{len(DISGUISED)} flagged ({rate:.1%})"
    )
    assert rate >= MIN_FLAGGED, missed


def test_ordinary_answers_mentioning_ai_or_companies_are_rarely_flagged() -> None:
    flagged = [(text, scan_answer(text)) for text in ORDINARY if scan_answer(text)]
    rate = len(flagged) / len(ORDINARY)
    print(f"ordinary corpus: {len(flagged)}/{len(ORDINARY)} falsely flagged ({rate:.1%})")
    assert rate <= MAX_FALSE_FLAGS, flagged


@pytest.mark.parametrize(
    ("markdown", "visible"),
    [
        ("I'm **Claude**.", "I'm Claude."),
        ("Open**AI**", "OpenAI"),
        ("Open&#65;I", "OpenAI"),
        ("`Claude`", "Claude"),
        ("Cl\u200baude", "Claude"),
        ("Cl\u00adaude", "Claude"),
        ("\uff23laude", "Claude"),
        ("\u0421laude", "Claude"),
        ("GPT\u20114", "GPT-4"),
        ("\u202eClaude", "Claude"),
        ("[Claude](https://example.com)", "Claude"),
    ],
)
def test_the_visible_text_is_what_the_worker_reads(markdown: str, visible: str) -> None:
    assert worker_visible_text(markdown).strip() == visible


def test_a_link_target_the_worker_cannot_see_does_not_count_as_text() -> None:
    assert "anthropic" not in worker_visible_text("[a guide](https://anthropic.com/docs)")
