"""The MT-Bench importer: small files written here, the real database underneath."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System, Worker
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.services.mtbench_import import MTBENCH_JUDGE_NAME
from tests.leaderboard.conftest import HUMAN, run_import, write_jsonl


def test_import_creates_prompts_systems_empty_answers_and_a_study_that_says_texts_are_missing(
    db: None, files: dict[str, Path]
) -> None:
    run_import(files)
    study = Study.objects.get(slug="mt-bench")
    assert "answer texts are not included" in study.notes
    assert study.categories == ["reasoning", "writing"]
    assert dict(Prompt.objects.values_list("external_id", "category")) == {
        "81": "writing",
        "101": "reasoning",
    }
    assert sorted(System.objects.values_list("name", flat=True)) == [
        "alpaca-13b",
        "claude-v1",
        "gpt-4",
    ]
    assert all(turns == [] for turns in Answer.objects.values_list("turns", flat=True))
    assert Pair.objects.filter(source=Pair.Source.IMPORTED).count() == 3


def test_votes_are_stored_in_canonical_order_with_the_winner_flipped_when_listed_reversed(
    db: None, files: dict[str, Path]
) -> None:
    run_import(files)
    pair = Pair.objects.get(prompt__external_id="81", turn=1)
    assert pair.answer_a.system.name == "alpaca-13b"
    votes = dict(pair.judgments.values_list("worker__external_id", "preference"))
    # expert_1 chose gpt-4 listed first; author_1 chose gpt-4 listed second: both are B.
    assert votes == {"expert_1": "B", "author_1": "B"}
    judgment = pair.judgments.get(worker__external_id="expert_1")
    assert judgment.is_imported and judgment.assignment is None
    assert judgment.likert is None and judgment.a_left is None


def test_expert_and_author_raters_are_distinct_imported_workers(
    db: None, files: dict[str, Path]
) -> None:
    run_import(files)
    assert sorted(
        Worker.objects.filter(panel=Worker.Panel.IMPORTED).values_list("external_id", flat=True)
    ) == ["author_1", "expert_1", "expert_2"]


def test_gpt4_verdicts_become_calls_of_one_imported_run_keeping_the_original_label(
    db: None, files: dict[str, Path]
) -> None:
    run_import(files)
    judge = Judge.objects.get(name=MTBENCH_JUDGE_NAME)
    assert judge.kind == Judge.Kind.IMPORTED
    run = JudgeRun.objects.get(judge=judge)
    assert run.status == JudgeRun.Status.IMPORTED
    calls = {
        turn: JudgeCall.objects.get(run=run, pair__turn=turn)
        for turn in JudgeCall.objects.filter(run=run).values_list("pair__turn", flat=True)
    }
    assert calls[1].verdict_label == "tie (inconsistent)" and calls[1].preference == "tie"
    # Turn 2 lists gpt-4 first and says model_b (alpaca) won: canonical A.
    assert calls[2].verdict_label == "model_b" and calls[2].preference == "A"
    assert {c.order for c in calls.values()} == {"both"}
    assert run.pairs.count() == 2


def test_importing_twice_leaves_the_same_rows(db: None, files: dict[str, Path]) -> None:
    run_import(files)
    run_import(files)
    assert Pair.objects.count() == 3
    assert HumanJudgment.objects.count() == 4
    assert JudgeCall.objects.count() == 2
    assert JudgeRun.objects.count() == 1


def test_turn_option_limits_the_import_to_that_turn(db: None, files: dict[str, Path]) -> None:
    run_import(files, "2")
    assert set(Pair.objects.values_list("turn", flat=True)) == {2}
    assert HumanJudgment.objects.count() == 1
    run_import(files, "1", "2")
    assert HumanJudgment.objects.count() == 4


def test_a_bad_row_names_its_file_and_line_and_nothing_is_written(
    db: None, files: dict[str, Path]
) -> None:
    bad = [*HUMAN, {**HUMAN[0], "winner": "model_c"}]
    write_jsonl(files["human"], bad)
    with pytest.raises(CommandError, match=r"human.jsonl, line 5: winner 'model_c'"):
        run_import(files)
    assert not Study.objects.filter(slug="mt-bench").exists()
    assert Pair.objects.count() == 0


def test_an_unknown_turn_option_is_refused(db: None, files: dict[str, Path]) -> None:
    with pytest.raises(CommandError, match="--turn '3'"):
        run_import(files, "3")


def test_a_configured_judge_named_like_the_import_stops_it_and_no_vote_is_written(
    db: None, files: dict[str, Path]
) -> None:
    # People's votes are written first, by annotation's service: the judges' refusal that comes
    # after must take them back too (one transaction around both).
    Judge.objects.create(name=MTBENCH_JUDGE_NAME, kind=Judge.Kind.RANDOM)
    with pytest.raises(CommandError, match="mt-bench: judge .* not an imported one"):
        run_import(files)
    assert not Study.objects.filter(slug="mt-bench").exists()
    assert not HumanJudgment.objects.exists() and not Pair.objects.exists()
