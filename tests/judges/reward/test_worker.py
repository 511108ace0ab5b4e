"""A real Celery worker on the reward_model queue trains a PL model, scores a study and its
contrast set."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.core.management import call_command

from judges.models import ContrastScoring, JudgeCall, JudgeRun, PLTraining
from judges.reward.services import (
    TrainingRequest,
    pl_training_retry,
    pl_training_start,
    pl_trainings_reconcile,
)
from judges.services.runs import judge_run_start
from leaderboard.services.contrast import contrast_set_build
from tests.conftest import Cast
from tests.judges.integration import WorkerProcess, broker_purge, wait_for, worker_start
from tests.judges.reward.conftest import ranked_study

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUEUE = "reward_model"


@pytest.fixture
def reward_worker(
    settings: LazySettings, tmp_path: Path, reward_dirs: Path, embedding_cache: Path
) -> Iterator[Callable[[str], WorkerProcess]]:
    broker_purge(settings.CELERY_BROKER_URL, QUEUE)
    started: list[WorkerProcess] = []
    env = {
        "CONCORD_REWARD_CACHE_DIR": str(embedding_cache),
        "CONCORD_REWARD_ARTIFACTS_DIR": str(reward_dirs),
    }

    def start(name: str) -> WorkerProcess:
        worker = worker_start(tmp_path, name, queues=QUEUE, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def status_of(training: PLTraining) -> str:
    return PLTraining.objects.values_list("status", flat=True).get(pk=training.pk)


def test_the_command_trains_on_a_worker_and_a_run_scores_the_study(
    cast: Cast,
    reward_worker: Callable[[str], WorkerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    pairs = ranked_study(cast.study, prompts=8)
    worker = reward_worker("pl-a")
    out = io.StringIO()
    call_command(
        "train_pl_model",
        "--study", cast.study.slug, "--name", "pl-worker", "--user", cast.researcher.username,
        "--epochs", "20", "--hidden", "32", "--seed", "4", "--poll", "0.2",
        stdout=out,
    )  # fmt: skip
    assert "training" in out.getvalue() and "done: judge 'pl-worker'" in out.getvalue()
    assert "20/20" in capsys.readouterr().err  # the progress bar reached the last epoch
    training = PLTraining.objects.get()
    assert training.judge is not None
    run = judge_run_start(judge=training.judge, study=cast.study, user=cast.researcher)
    wait_for(
        lambda: JudgeRun.objects.get(pk=run.pk).status == JudgeRun.Status.DONE,
        60,
        worker.text,
    )
    assert JudgeCall.objects.filter(run=run, status="done").count() == len(pairs) == 48
    # A contrast set built now (the build commits at once here) sends the run's scoring of it
    # to the worker, which stores it for the report.
    contrast_set = contrast_set_build(study=cast.study, low=-1.0, high=1.0).stored.contrast_set
    wait_for(
        lambda: ContrastScoring.objects.filter(
            run=run, contrast_set=contrast_set, status=ContrastScoring.Status.DONE
        ).exists(),
        60,
        worker.text,
    )


def test_a_worker_killed_mid_training_leaves_it_failed_then_a_retry_finishes_it(
    cast: Cast, settings: LazySettings, reward_worker: Callable[[str], WorkerProcess]
) -> None:
    ranked_study(cast.study, prompts=8)
    request = TrainingRequest(name="pl-killed", epochs=400, hidden=32, batch_size=4, seed=1)
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    first = reward_worker("pl-b")
    wait_for(lambda: PLTraining.objects.get(pk=training.pk).epoch >= 3, 60, first.text, every=0.05)
    first.kill()
    settings.CONCORD_REWARD_HEARTBEAT_STALE_SECONDS = 1
    wait_for(lambda: pl_trainings_reconcile() == 1, 10)
    training.refresh_from_db()
    assert training.status == PLTraining.Status.FAILED
    assert "the worker stopped" in training.error
    assert training.judge is None and not training.artifact
    pl_training_retry(training=training, user=cast.researcher)
    second = reward_worker("pl-c")
    wait_for(lambda: status_of(training) == PLTraining.Status.DONE, 240, second.text)
    training.refresh_from_db()
    assert training.attempts == 2 and training.judge is not None
