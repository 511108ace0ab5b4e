"""The PL judge in the study's report: AdvisorQA's Table 3 and the position-bias section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judges.models import Judge, PLTraining
from judges.reward.artifacts import artifact_metadata
from judges.reward.scoring import pl_run_execute
from judges.reward.services import TrainingRequest, pl_training_execute, pl_training_start
from judges.services.calls import judge_call_execute
from judges.services.judges import judge_create
from judges.services.runs import judge_run_start
from leaderboard.report.base import RenderContext
from leaderboard.report.position_bias import ORDER_INVARIANT
from leaderboard.report.registry import section_get
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services.reports import ReportParams, report_data, votes_and_reads_get
from tests.conftest import Cast
from tests.judges.reward.conftest import ranked_study

pytestmark = pytest.mark.django_db


def test_the_report_ranks_answers_by_every_source_and_calls_the_pl_judge_order_invariant(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=4, human=True)
    request = TrainingRequest(name="pl-report", epochs=10, hidden=32, batch_size=8, seed=3)
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert pl_training_execute(training_id=training.pk) == "done"
    training.refresh_from_db()
    assert training.judge is not None
    pl_run = judge_run_start(judge=training.judge, study=cast.study, user=cast.researcher)
    assert pl_run_execute(run_id=pl_run.pk) == "done"
    longer = judge_create(name="longer", kind=Judge.Kind.LONGER)
    run = judge_run_start(judge=longer, study=cast.study, user=cast.researcher)
    for call in run.calls.all():
        judge_call_execute(call_id=call.pk)

    # The two sections alone (the whole report compiles the Elo kernel first: minutes here).
    votes, reads = votes_and_reads_get(study=cast.study, filters=VoteFilters())
    data = report_data(votes=votes, reads=reads, params=ReportParams())
    payload: dict[str, Any] = {}
    for key in ("advisorqa_table3", "position_bias"):
        section = section_get(key)
        payload.update(section.dump(section.compute(data)))
    table = payload["advisorqa_table3"]
    # Only the prompt the training held out (ceil(0.2 x 4) = 1 of the 4 ranked prompts), as
    # stored on the training and in its artifact.
    held = training.held_out_prompts
    assert held == artifact_metadata(training.artifact)["held_out_prompts"] and len(held) == 1
    assert (table["lists"], table["lists_all"], table["prompts"]) == (1, 4, "held-out")
    pl_name = next(iter(table["held_out_of"]))
    assert "pl-report" in pl_name and table["held_out_of"][pl_name] == "seed 3, held-out share 0.2"
    result = section_get("advisorqa_table3").load(payload)
    shown = section_get("advisorqa_table3").tables(result, _context(payload))[0]
    assert shown.title.endswith(": 1 held-out prompts of 4")
    assert shown.note.startswith("1 held-out prompts of the 4 with a gold order, held out of")
    rows: dict[str, list[dict[str, Any]]] = {row["ranking"]: [] for row in table["rows"]}
    for row in table["rows"]:
        rows[row["ranking"]].append(row)
    assert [r["source"] for r in rows["scores"]] == [
        next(r["source"] for r in rows["scores"] if "pl-report" in r["source"])
    ]
    assert "PL listwise, all answers" in rows["scores"][0]["source"]
    people = next(r for r in rows["wins"] if r["source"] == "people")
    assert (people["first_vs_second"], people["first_vs_last"]) == (1.0, 1.0)
    # The longer-answer judge and the longer-answer ranker agree: ranks follow length here.
    judge = next(r for r in rows["wins"] if r["source"].startswith("longer"))
    assert judge["first_vs_last"] == rows["length"][0]["first_vs_last"]

    section = section_get("position_bias")
    result = section.load(payload)
    pl_source = next(name for name in result.judges if "pl-report" in name)
    assert result.judges[pl_source].order_invariant
    assert result.judges[pl_source].histogram is None
    context_rows = section.tables(result, _context(payload))[0]
    pl_row = next(r for r in context_rows.rows if r[0] == pl_source)
    assert pl_row[1] == ORDER_INVARIANT
    assert "no position bias to measure" in context_rows.note

    # A training whose split is not known: every prompt, and the table says so.
    PLTraining.objects.filter(pk=training.pk).update(held_out_prompts=None)
    votes, reads = votes_and_reads_get(study=cast.study, filters=VoteFilters())
    data = report_data(votes=votes, reads=reads, params=ReportParams())
    unknown = section_get("advisorqa_table3").compute(data)
    assert (unknown.lists, unknown.prompts, unknown.split_unknown) == (4, "all", [pl_name])
    assert "Training split not known for" in unknown.prompts_note
    # A model trained on another study has seen none of this study's prompts: every prompt.
    PLTraining.objects.filter(pk=training.pk).update(held_out_prompts=held, study=cast.other_study)
    votes, reads = votes_and_reads_get(study=cast.study, filters=VoteFilters())
    data = report_data(votes=votes, reads=reads, params=ReportParams())
    other = section_get("advisorqa_table3").compute(data)
    assert (other.lists, other.prompts, other.split_unknown) == (4, "all", [])
    assert other.prompts_note == "All 4 prompts with a gold order."


def _context(payload: dict[str, Any]) -> RenderContext:
    judges = [name for name in payload["position_bias"] if name != "human"]
    return RenderContext(sources=("human", *sorted(judges)), definition="")
