"""Any local Hugging Face sequence-classification checkpoint through the same training path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer

from judges.models import AnswerScore, JudgeCall, JudgeRun, PLTraining
from judges.reward.encoder import backbone_path
from judges.reward.hf import CheckpointError, checkpoint_check
from judges.reward.scoring import pl_run_execute
from judges.reward.services import TrainingRequest, pl_training_execute, pl_training_start
from judges.services.runs import judge_run_start
from tests.conftest import Cast
from tests.judges.reward.conftest import ranked_study


def tiny_config(num_labels: int) -> BertConfig:
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    config.num_labels = num_labels
    return config


def tiny_checkpoint(folder: Path, *, kind: str = "classifier", num_labels: int = 1) -> Path:
    """Build and save a one-layer BERT with the encoder's own vocabulary (no download)."""
    tokenizer = BertTokenizer(vocab_file=str(backbone_path("all-MiniLM-L6-v2") / "vocab.txt"))
    model = (
        BertForSequenceClassification(tiny_config(num_labels))
        if kind == "classifier"
        else BertModel(tiny_config(num_labels))
    )
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def test_a_checkpoint_of_the_wrong_kind_is_refused_with_its_reason(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint_check(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="BertModel architecture, not a sequence classifier"):
        checkpoint_check(tiny_checkpoint(tmp_path / "base", kind="base"))
    with pytest.raises(CheckpointError, match="num_labels=2"):
        checkpoint_check(tiny_checkpoint(tmp_path / "two", num_labels=2))
    assert checkpoint_check(tiny_checkpoint(tmp_path / "one"))["num_labels"] == 1


@pytest.mark.django_db
def test_a_tiny_checkpoint_trains_and_scores_a_study_on_the_cpu(
    cast: Cast, reward_dirs: Path, checkpoints_root: Path
) -> None:
    pairs = ranked_study(cast.study, prompts=6)
    tiny_checkpoint(checkpoints_root / "tiny")
    request = TrainingRequest(
        name="pl-hf", mode="hf", checkpoint="tiny", epochs=2, batch_size=8, seed=1
    )
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert pl_training_execute(training_id=training.pk) == "done"
    training.refresh_from_db()
    assert training.status == PLTraining.Status.DONE, training.error
    folder = reward_dirs / training.artifact
    metadata = json.loads((folder / "metadata.json").read_text())
    assert (metadata["kind"], metadata["device"], metadata["max_length"]) == ("hf", "cpu", 64)
    assert (folder / "model" / "config.json").is_file()
    assert len(training.curve) == 2
    assert training.judge is not None
    run = judge_run_start(judge=training.judge, study=cast.study, user=cast.researcher)
    assert pl_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE
    assert AnswerScore.objects.filter(run=run).count() == 24
    assert JudgeCall.objects.filter(run=run, status="done").count() == len(pairs)


@pytest.mark.django_db
def test_a_wrong_checkpoint_is_refused_before_anything_is_queued(
    cast: Cast, reward_dirs: Path, checkpoints_root: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    tiny_checkpoint(checkpoints_root / "base", kind="base")
    request = TrainingRequest(name="pl-bad", mode="hf", checkpoint="base")
    with pytest.raises(ValidationError, match="'base' is a BertModel .*not a sequence classifier"):
        pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert not PLTraining.objects.exists()


@pytest.mark.django_db
def test_fine_tuning_the_encoder_trains_it_with_a_fresh_one_score_head(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=3)
    request = TrainingRequest(name="pl-ft", mode="finetune", epochs=1, batch_size=4, seed=2)
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert pl_training_execute(training_id=training.pk) == "done"
    training.refresh_from_db()
    metadata = json.loads((reward_dirs / training.artifact / "metadata.json").read_text())
    assert metadata["backbone_label"] == "all-MiniLM-L6-v2 (fine-tuned)"
    assert checkpoint_check(reward_dirs / training.artifact / "model")["num_labels"] == 1
