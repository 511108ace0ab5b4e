"""The registry of judge kinds (judges/kinds.py): one entry per kind, and what each one says.

A kind added to Judge.Kind without its entry would fail at its first run, its first page or its
first lease that ran out; this file fails first.
"""

from __future__ import annotations

from collections import Counter

import pytest

from judges.kinds import KINDS, RUNNABLE_KINDS, judge_kind
from judges.models import Judge
from judges.services.judges import judge_readiness


def test_every_judge_kind_has_exactly_one_registry_entry() -> None:
    counts = Counter(entry.kind for entry in KINDS)
    assert counts == Counter(Judge.Kind.values)
    for kind in Judge.Kind.values:
        assert judge_kind(kind).kind == kind


def test_a_kind_is_run_when_it_has_a_plan_and_then_a_resume_too() -> None:
    for entry in KINDS:
        assert (entry.plan is None) == (entry.resume is None), entry.kind
    assert set(RUNNABLE_KINDS) == set(Judge.Kind.values) - {Judge.Kind.IMPORTED}


def test_only_an_llm_judges_requests_are_paid() -> None:
    # A lost lease of a paid call is counted as possibly paid twice, and a run's estimate to
    # finish is made from its judge's prices: neither applies to a model the project runs.
    assert [entry.kind for entry in KINDS if entry.paid] == [Judge.Kind.LLM]


@pytest.mark.django_db
def test_each_kind_says_whether_its_judge_can_run_now() -> None:
    said = {
        kind: judge_readiness(judge=Judge.objects.create(name=f"j-{kind}", kind=kind))
        for kind in Judge.Kind.values
    }
    assert said[Judge.Kind.RANDOM] == said[Judge.Kind.LONGER] == ""
    assert said[Judge.Kind.LLM].startswith("not configured: An LLM judge needs a base URL")
    assert said[Judge.Kind.PL].startswith("not ready: ")
    assert said[Judge.Kind.PANEL] == "not configured: a panel needs at least two members"
    assert said[Judge.Kind.IMPORTED] == (
        "not runnable: Imported verdicts judges are not run as calls"
    )
