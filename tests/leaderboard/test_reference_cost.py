"""The cost table counts what writing reference answers cost (the reference ledger,
judges.models.ReferenceCall) in the cost of every judge that reads them, and a panel counts
them once; the report's data fingerprint and hash follow the ledger."""

from __future__ import annotations

from decimal import Decimal

import pytest

from judges.models import Judge, JudgeCall, JudgeRun, ReferenceCall
from leaderboard.selectors.snapshots import study_data_fingerprint
from leaderboard.services.reports import agreement_report_build
from tests.leaderboard.test_agreement_cost_section import FAST, World, world

__all__ = ["world"]

REFERENCE_COST = Decimal("0.05")


def references_written(world: World, *, guided: tuple[str, ...]) -> Judge:
    """The study's first 10 prompts in the reference category math, each with a reference
    written for REFERENCE_COST, plus one refused (paid) attempt of 0.01 on q0; the `guided`
    judges given a reference template."""
    study = world.study
    study.reference_categories = ["math"]
    study.save(update_fields=["reference_categories"])
    writer = Judge.objects.create(name="ref writer", kind="llm")
    other = Judge.objects.create(name="ref writer 2", kind="llm")
    prompts = list(study.prompts.order_by("pk"))[:10]
    for prompt in prompts:
        prompt.category = "math"
        prompt.save(update_fields=["category"])
        ReferenceCall.objects.create(
            study=study,
            prompt=prompt,
            judge=writer,
            idempotency_key=f"k{prompt.pk}",
            status="done",
            stored=True,
            cost_usd=REFERENCE_COST,
        )
    ReferenceCall.objects.create(
        study=study,
        prompt=prompts[0],
        judge=other,
        idempotency_key="refused",
        status="failed",
        cost_usd=Decimal("0.01"),
    )
    Judge.objects.filter(name__in=guided).update(reference_template="Reference: {reference}")
    return writer


def rows_of(world: World) -> dict[str, dict]:
    report = agreement_report_build(study=world.study, params=FAST)
    return {row["source"]: row for row in report["agreement_cost"]["rows"]}


def test_a_reference_guided_judge_carries_what_its_references_cost(world: World) -> None:
    before = rows_of(world)
    assert before["dear"]["cost_per_1000"] == pytest.approx(20.0)  # $0.02 a pair, 20 pairs

    references_written(world, guided=("dear",))
    rows = rows_of(world)

    # 20 pairs at $0.02, and 10 references at $0.05 plus a refused attempt at $0.01.
    assert rows["dear"]["cost_per_1000"] == pytest.approx((0.4 + 0.5 + 0.01) / 20 * 1000)
    assert rows["dear"]["priced_by"] == "judge ledger"
    assert rows["dear"]["agreement_per_dollar"] == pytest.approx(
        rows["dear"]["agreement"]["share"] / rows["dear"]["cost_per_1000"]
    )
    # A judge without a reference template reads no reference, and pays for none.
    assert rows["cheap"]["cost_per_1000"] == pytest.approx(1.0)


def test_a_panel_of_two_reference_guided_judges_counts_the_references_once(world: World) -> None:
    references_written(world, guided=("cheap", "dear"))
    runs = {run.judge.name: run for run in JudgeRun.objects.filter(study=world.study)}
    panel = JudgeRun.objects.create(
        judge=Judge.objects.create(name="jury", kind="panel", panel_rule="majority"),
        study=world.study,
        status="done",
    )
    panel.panel_sources.set([runs["cheap"], runs["dear"]])
    for call in JudgeCall.objects.filter(run=runs["dear"]):
        JudgeCall.objects.create(
            run=panel,
            pair_id=call.pair_id,
            order="ab",
            status="done",
            likert_shown=call.likert_shown,
            likert=call.likert,
            preference=call.preference,
        )

    rows = rows_of(world)

    references = 0.5 + 0.01
    assert rows["cheap"]["cost_per_1000"] == pytest.approx((0.02 + references) / 20 * 1000)
    assert rows["dear"]["cost_per_1000"] == pytest.approx((0.4 + references) / 20 * 1000)
    assert rows["jury"]["cost_per_1000"] == pytest.approx((0.02 + 0.4 + references) / 20 * 1000)


def test_a_reference_written_marks_the_report_stale(world: World) -> None:
    Judge.objects.filter(name="dear").update(reference_template="Reference: {reference}")
    world.study.reference_categories = ["math"]
    world.study.save(update_fields=["reference_categories"])
    before = study_data_fingerprint(study=world.study)
    references_written(world, guided=("dear",))
    assert study_data_fingerprint(study=world.study) != before
