"""The pure statistics and the annotation forms name the seven values with the same keys."""

from __future__ import annotations

from annotation.models import SEVEN_VALUES as FORM_VALUES
from leaderboard.stats.rationale import SEVEN_VALUES


def test_rationale_statistics_use_the_keys_the_forms_store() -> None:
    assert tuple(key for key, _, _ in FORM_VALUES) == SEVEN_VALUES
