"""The demo trains a small PL model on the demo study's ranked lists, then runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.services.demo import demo_setup
from judges.models import JudgeCall, JudgeRun, PLTraining
from judges.reward.demo import DEMO_PL_NAME, demo_pl_model_queue
from judges.reward.scoring import pl_run_execute
from judges.reward.services import pl_training_execute

pytestmark = pytest.mark.django_db


def test_the_demo_queues_its_pl_model_once_and_the_model_runs_on_the_study_when_trained(
    reward_dirs: Path,
) -> None:
    study = demo_setup().study
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
    assert demo_pl_model_queue(study=study) == f"{DEMO_PL_NAME!r}: trained"
