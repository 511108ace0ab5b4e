"""The shared conventions have one home, core/conventions.py, and every part that applies them
agrees with it: the Likert collapse of the study form, of the LLM judges' parser, of the report's
statistics; the seven values of the form, the judges' prompt and the report; the gold kinds of the
pair form, the command and the report."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from annotation.models import Pair, Preference
from annotation.services.judgments import likert_preference
from core.conventions import (
    GOLD_KINDS,
    LIKERT_SCORES,
    SEVEN_VALUE_KEYS,
    SEVEN_VALUES,
    likert_collapse,
    likert_mirror,
)
from judges.llm.parsing import likert_canonical, likert_side
from leaderboard.stats.likert import canonical_score, collapse
from leaderboard.stats.rationale import rationale_distribution

REPO = Path(__file__).resolve().parents[2]
# Written by hand from DESIGN.md ("Conventions"), after the H4 study's 1-8 scale.
WITH_TIES = {1: "A", 2: "A", 3: "A", 4: "tie", 5: "tie", 6: "B", 7: "B", 8: "B"}
WITHOUT_TIES = {1: "A", 2: "A", 3: "A", 4: "A", 5: "B", 6: "B", 7: "B", 8: "B"}


def test_the_collapse_and_the_mirror_are_the_designs() -> None:
    assert LIKERT_SCORES == (1, 2, 3, 4, 5, 6, 7, 8)
    assert {s: likert_collapse(s) for s in LIKERT_SCORES} == WITH_TIES
    assert {s: likert_collapse(s, ties=False) for s in LIKERT_SCORES} == WITHOUT_TIES
    assert [likert_mirror(s) for s in LIKERT_SCORES] == [8, 7, 6, 5, 4, 3, 2, 1]


@pytest.mark.parametrize("ties", [True, False])
def test_the_reports_column_collapse_is_the_same_rule(ties: bool) -> None:
    scores = np.array([8, 1, 4, 5, 3, 6, 2, 7, 4])
    expected = [(WITH_TIES if ties else WITHOUT_TIES)[s] for s in scores]
    assert collapse(scores, ties=ties).tolist() == expected
    assert collapse(scores, ties=ties).dtype == np.dtype("<U3")
    assert collapse([], ties=ties).tolist() == []
    with pytest.raises(ValueError, match="1..8"):
        collapse([0, 9], ties=ties)


def test_the_form_and_the_llm_parser_collapse_as_the_report_does() -> None:
    sides = {"A": "first", "tie": "tie", "B": "second"}
    for score in LIKERT_SCORES:
        assert likert_preference(score) == Preference(WITH_TIES[score])
        assert likert_side(score) == sides[WITH_TIES[score]]
        assert likert_canonical(score, "ba") == likert_mirror(score)
        assert canonical_score([score], [False]).tolist() == [likert_mirror(score)]


def test_the_seven_values_in_advisorqas_order() -> None:
    assert SEVEN_VALUE_KEYS == (
        "relevance",
        "actionability",
        "empathy",
        "creativity",
        "clarity",
        "constructiveness",
        "ethics",
    )
    assert tuple(key for key, _, _ in SEVEN_VALUES) == SEVEN_VALUE_KEYS
    rows = rationale_distribution([["ethics"], ["relevance", "ethics"]])
    assert list(rows["value"]) == list(SEVEN_VALUE_KEYS)


def test_the_gold_kinds_are_the_models_in_the_canonical_order() -> None:
    assert GOLD_KINDS == ("first_vs_second", "first_vs_last")
    assert set(GOLD_KINDS) == set(Pair.GoldKind.values) - {""}


# Names that only core/conventions.py may bind at a module's top level.
ONE_HOME = frozenset({"GOLD_KINDS", "SEVEN_VALUES", "SEVEN_VALUE_KEYS", "LIKERT_MIN", "LIKERT_MAX"})


def test_no_other_module_writes_a_convention_again() -> None:
    found = []
    for folder in ("core", "annotation", "judges", "leaderboard", "rankeval"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path == REPO / "core" / "conventions.py" or "migrations" in path.parts:
                continue
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AnnAssign)
                    else []
                )
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in ONE_HOME:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {target.id}")
    assert not found, "import it from core.conventions instead:\n" + "\n".join(found)
