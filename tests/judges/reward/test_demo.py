"""The demo trains a small PL model on the demo study's ranked lists, then runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.models import ContrastPair, Pair
from annotation.services.demo import demo_setup
from judges.models import ContrastScoring, JudgeCall, JudgeRun, PLTraining
from judges.reward.demo import DEMO_PL_NAME, demo_pl_model_queue
from judges.reward.scoring import pl_run_execute
from judges.reward.services import pl_training_execute
from leaderboard.selectors.contrast import score_consistency_read
from leaderboard.services.demo import demo_contrast_ensure

pytestmark = pytest.mark.django_db


def test_the_demo_queues_its_pl_model_once_and_the_model_runs_on_the_study_when_trained(
    reward_dirs: Path,
) -> None:
    study = demo_setup().study
    assert (
        demo_contrast_ensure(study=study)
        == "Contrast set: 3 pairs of similar prompts, 6 contrast items."
    )
    assert "queued on the reward_model worker" in demo_pl_model_queue(study=study)
    assert "is pending" in demo_pl_model_queue(study=study)
    training = PLTraining.objects.get()
    assert training.data_summary["lists"] == 6
    assert pl_training_execute(training_id=training.pk) == "done"
    training.refresh_from_db()
    assert training.metrics["held_out"]["lists"] == 3
    run = JudgeRun.objects.get(judge=training.judge)  # started by the training
    assert pl_run_execute(run_id=run.pk) == "done"
    assert JudgeCall.objects.filter(run=run).count() == study.pairs.count()
    # The contrast set was built first, so the run scored it as its last step, for the report.
    scoring = ContrastScoring.objects.get(run=run)
    assert (scoring.status, scoring.pairs) == (ContrastScoring.Status.DONE, 3)
    # The Consistency section has the model's C_res over the 3 contrast pairs, one comparison
    # each (Eq. 2), and over both directions as a named extra.
    plain = score_consistency_read(study=study, run_ids=[run.pk])[run.pk].plain()
    assert plain.pairs == 3 and plain.c_res.proportion.total == 3
    assert plain.c_res_both_directions is not None
    assert plain.c_res_both_directions.proportion.total == 6
    assert demo_pl_model_queue(study=study) == f"{DEMO_PL_NAME!r}: trained"


def test_the_demo_pairs_its_lexically_close_prompts_into_a_contrast_set_with_items(
    reward_dirs: Path,
) -> None:
    study = demo_setup().study
    expected = "Contrast set: 3 pairs of similar prompts, 6 contrast items."
    assert demo_contrast_ensure(study=study) == expected
    pairs = ContrastPair.objects.filter(contrast_set__study=study)
    assert sorted(
        (c.prompt_a.external_id, c.prompt_b.external_id, c.answer_a.system.name) for c in pairs
    ) == [
        ("demo-002", "demo-034", "atlas-large"),
        ("demo-008", "demo-032", "atlas-large"),
        ("demo-014", "demo-033", "atlas-large"),
    ]
    assert all(0.75 <= c.similarity <= 0.9 for c in pairs)
    assert Pair.objects.filter(study=study, source=Pair.Source.CONTRAST).count() == 6
    # Setting the demo up again finds the same set and items and makes nothing new.
    assert demo_contrast_ensure(study=study) == expected
    assert Pair.objects.filter(study=study, source=Pair.Source.CONTRAST).count() == 6
