"""The conventions every part of Concord shares, written once (DESIGN.md, "Conventions").

Pure Python, no Django and no numpy, so that forms, services, the LLM judges' parser and
`leaderboard.stats` all read the same rule (tests/test_app_boundaries.py lets `leaderboard.stats`
import this module and nothing else of the project).

- **Likert 1-8.** 1 means the first answer (A, or the one shown first) is much better, 8 means the
  second is much better; 4 and 5 are the two sides of "about equal". Mirroring (9 - score) turns a
  score read with B shown first into canonical A/B terms. The scale and its collapse follow the
  Hugging Face H4 study "Can foundation models label data like humans?" (Rajani et al., 2023).
- **The collapse.** With ties: 1-3 = A, 4-5 = tie, 6-8 = B. Without ties: 1-4 = A, 5-8 = B.
- **The seven values** a worker may give as the reason why the better answer is better, in
  AdvisorQA's order (Kim et al. 2024, "AdvisorQA: Towards helpful and harmless advice-seeking
  question answering with collective intelligence").
- **Gold kinds**: the two kinds of gold pair made from a prompt's ranked answers.
"""

from __future__ import annotations

from typing import Literal

Preference = Literal["A", "B", "tie"]
PREFERENCES: tuple[Preference, ...] = ("A", "B", "tie")

LIKERT_MIN = 1
LIKERT_MAX = 8
LIKERT_SCORES: tuple[int, ...] = tuple(range(LIKERT_MIN, LIKERT_MAX + 1))


def likert_mirror(score: int) -> int:
    """The same judgment with the answers' order swapped: ``9 - score`` (1 <-> 8, 4 <-> 5)."""
    return LIKERT_MIN + LIKERT_MAX - score


def likert_collapse(score: int, *, ties: bool = True) -> Preference:
    """A Likert 1-8 score as a preference: with ties 1-3 "A", 4-5 "tie", 6-8 "B"; without ties
    1-4 "A", 5-8 "B" (the H4 study's collapse). On a score as shown, "A" reads "the first shown".
    The caller checks the range (every score Concord stores is 1-8 by a database constraint)."""
    if ties:
        return "A" if score <= 3 else "B" if score >= 6 else "tie"
    return "A" if score <= 4 else "B"


# (key, label, description): the keys are stored in judgments and read by the report.
SEVEN_VALUES: tuple[tuple[str, str, str], ...] = (
    ("relevance", "Relevance", "Addresses the question that was actually asked."),
    (
        "actionability",
        "Actionability and practicality",
        "Gives steps or information the asker can act on.",
    ),
    ("empathy", "Empathy and sensitivity", "Acknowledges the asker's situation and feelings."),
    ("creativity", "Creativity", "Offers a fresh angle or idea rather than the obvious."),
    ("clarity", "Readability and clarity", "Is easy to read, well organised and unambiguous."),
    ("constructiveness", "Constructiveness", "Builds something useful instead of only judging."),
    ("ethics", "Ethics", "Is honest, fair and avoids harm."),
)
SEVEN_VALUE_KEYS: tuple[str, ...] = tuple(key for key, _, _ in SEVEN_VALUES)

GoldKind = Literal["first_vs_second", "first_vs_last"]
# The canonical order, closer pair first: the report's gold-order section lists them so (and its
# JSON keeps that order), and the pair form and `generate_pairs --gold` offer them so.
GOLD_KINDS: tuple[GoldKind, ...] = ("first_vs_second", "first_vs_last")
