"""Any local Hugging Face sequence-classification checkpoint as the PL model (num_labels = 1).

The model reads the question and the answer as one text pair and its single logit is the score
h(q, a). It trains through the same loop as the head (:mod:`judges.reward.training`): on a CUDA
GPU when one is present, in bfloat16 mixed precision there, else on the CPU. Fine-tuning the
default sentence encoder uses this path too: its BERT weights get a fresh one-logit head.
Everything loads with ``local_files_only``: nothing is downloaded, ever.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from django.conf import settings

from core.errors import ApplicationError
from judges.reward import encoder  # noqa: F401 - sets HF_HUB_OFFLINE before transformers loads

HF_BATCH_SIZE = 16


class CheckpointError(ApplicationError, ValueError):
    """The checkpoint folder is missing or is not a one-logit sequence classifier."""


# The one answer for a checkpoint that is not a folder under the root: the same whether the path
# is missing, outside the root, a file, a link out of it or unreadable, so the field cannot be
# used to learn which folders exist on the server.
CHECKPOINT_REFUSED = (
    "not a checkpoint folder of this server: give the name of a folder under the checkpoints "
    "root (CONCORD_PL_CHECKPOINTS_ROOT)"
)


def checkpoint_resolve(value: str) -> Path:
    """The folder a checkpoint field names, resolved (links and `..` followed), when it lies under
    CONCORD_PL_CHECKPOINTS_ROOT; CheckpointError(CHECKPOINT_REFUSED) for anything else.

    `value` is a path relative to the root (`pythia-1.4b-pl`) or an absolute one inside it."""
    root = Path(str(settings.CONCORD_PL_CHECKPOINTS_ROOT))
    if not value.strip() or "\x00" in value:
        raise CheckpointError(CHECKPOINT_REFUSED)
    try:
        real_root = root.resolve(strict=True)
        folder = (root / value.strip()).resolve(strict=True)
        inside = folder != real_root and folder.is_relative_to(real_root)
        usable = inside and folder.is_dir() and os.access(folder, os.R_OK | os.X_OK)
    except (OSError, RuntimeError, ValueError):  # missing, a link loop, a bad name
        usable = False
    if not usable:
        raise CheckpointError(CHECKPOINT_REFUSED)
    return folder


def checkpoint_check(path: str | Path, *, name: str | None = None) -> dict[str, Any]:
    """Return the checkpoint's config as a dict; raise CheckpointError naming what is wrong.

    `name` is how the folder is named in the errors (a researcher's field gives the name under
    the checkpoints root, never the server's absolute path)."""
    folder = Path(path)
    shown = repr(name if name is not None else str(folder))
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint folder {shown} does not exist")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"checkpoint folder {shown} has no config.json")
    config: dict[str, Any] = json.loads(config_file.read_text())
    architectures = config.get("architectures") or []
    if not any(name.endswith("ForSequenceClassification") for name in architectures):
        raise CheckpointError(
            f"checkpoint {shown} is a {', '.join(architectures) or 'model of no named'} "
            "architecture, not a sequence classifier (…ForSequenceClassification)"
        )
    labels = config.get("num_labels") or len(config.get("id2label") or {}) or 2
    if labels != 1:
        raise CheckpointError(
            f"checkpoint {shown} has num_labels={labels}; a reward model has one score "
            "(num_labels=1)"
        )
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
        raise CheckpointError(f"checkpoint folder {shown} holds no weights")
    return {**config, "num_labels": labels}


def device_pick() -> torch.device:
    """CUDA when present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def hf_load(path: str | Path, *, fresh_head: bool = False) -> tuple[Any, Any]:
    """(model, tokenizer) from a local folder; `fresh_head` adds a new one-logit head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if not fresh_head:
        checkpoint_check(path)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(path), num_labels=1, local_files_only=True
    )
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return model, tokenizer


def max_length_of(model: Any, tokenizer: Any) -> int:
    """The longest input the model takes (its position embeddings), capped at 512 tokens."""
    limits = [getattr(model.config, "max_position_embeddings", 512), 512]
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and model_max < 100_000:
        limits.append(model_max)
    return int(min(limits))


def count_truncated_pairs(
    tokenizer: Any, questions: Sequence[str], answers: Sequence[str], max_length: int
) -> int:
    """How many (question, answer) inputs are longer than `max_length` tokens."""
    if not questions:
        return 0
    ids = tokenizer(list(questions), list(answers), truncation=False)["input_ids"]
    return sum(1 for row in ids if len(row) > max_length)


def _forward(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    answers: Sequence[str],
    *,
    device: torch.device,
    max_length: int,
) -> torch.Tensor:
    batch = tokenizer(
        list(questions),
        list(answers),
        truncation="longest_first",
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    ).to(device)
    logits: torch.Tensor = model(**batch).logits
    return logits.squeeze(-1)


def hf_scorer(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    answers: Sequence[str],
    *,
    device: torch.device,
    max_length: int,
) -> Any:
    """The training loop's scorer: answer indices -> the model's logits for those inputs."""

    def score(indices: torch.Tensor) -> torch.Tensor:
        rows = indices.tolist()
        return _forward(
            model,
            tokenizer,
            [questions[i] for i in rows],
            [answers[i] for i in rows],
            device=device,
            max_length=max_length,
        )

    return score


def hf_scores(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    answers: Sequence[str],
    *,
    device: torch.device,
    max_length: int,
    batch_size: int = HF_BATCH_SIZE,
) -> np.ndarray:
    """Scores of (question, answer) inputs, batched, mixed precision on CUDA, float64."""
    model.eval()
    model.to(device)
    out: list[np.ndarray] = []
    with (
        torch.no_grad(),
        torch.autocast(
            device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"
        ),
    ):
        for start in range(0, len(questions), batch_size):
            logits = _forward(
                model,
                tokenizer,
                questions[start : start + batch_size],
                answers[start : start + batch_size],
                device=device,
                max_length=max_length,
            )
            out.append(logits.float().cpu().double().numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float64)
