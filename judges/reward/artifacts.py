"""Trained PL models on disk: one folder each under `settings.CONCORD_REWARD_ARTIFACTS_DIR`.

A folder holds `metadata.json` (recipe, K, training data hash, backbone and its hash, seed,
library versions, metrics, training curve, settings) and the weights: `head.safetensors` for a
head on a frozen encoder, or `model/` (a Hugging Face checkpoint with its tokenizer) for a
fine-tuned or Hugging Face backbone. A folder is written under a temporary name beside its
final one and renamed into place when complete, so a folder that exists is whole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from core.errors import ApplicationError

METADATA = "metadata.json"
HEAD_WEIGHTS = "head.safetensors"
MODEL_FOLDER = "model"
KIND_HEAD = "head"
KIND_HF = "hf"


class ArtifactMissing(ApplicationError):
    """The judge's artifact folder is gone or incomplete."""


def artifacts_root() -> Path:
    return Path(settings.CONCORD_REWARD_ARTIFACTS_DIR)


def library_versions() -> dict[str, str]:
    """Versions of the libraries a model's numbers depend on."""
    import sentence_transformers
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def artifact_write(
    *,
    name: str,
    metadata: dict[str, Any],
    head_state: dict[str, Any] | None = None,
    hf_model: Any = None,
    hf_tokenizer: Any = None,
) -> Path:
    """Write a complete artifact folder `name` (replacing a leftover one); return its path."""
    from safetensors.torch import save_file

    root = artifacts_root()
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    partial = root / f".partial-{name}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    try:
        if head_state is not None:
            state = {key: value.detach().cpu().contiguous() for key, value in head_state.items()}
            save_file(state, str(partial / HEAD_WEIGHTS))
            metadata["weights_hash"] = file_hash(partial / HEAD_WEIGHTS)
        if hf_model is not None:
            hf_model.save_pretrained(str(partial / MODEL_FOLDER))
            hf_tokenizer.save_pretrained(str(partial / MODEL_FOLDER))
            metadata["weights_hash"] = file_hash(partial / MODEL_FOLDER)
        (partial / METADATA).write_text(json.dumps(metadata, indent=2, sort_keys=True))
        if final.exists():
            shutil.rmtree(final)  # a folder an earlier, killed attempt left without a judge
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def artifact_metadata(name: str) -> dict[str, Any]:
    """The metadata of an artifact; raise ArtifactMissing when its folder is not there."""
    path = artifacts_root() / name / METADATA
    if not name or not path.is_file():
        raise ArtifactMissing(f"the model folder {str(path.parent)!r} is missing")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def artifact_remove(name: str) -> None:
    shutil.rmtree(artifacts_root() / name, ignore_errors=True)


@dataclass
class LoadedModel:
    """A trained model ready to score (question, answer) texts."""

    metadata: dict[str, Any]
    head: Any = None
    hf_model: Any = None
    hf_tokenizer: Any = None

    def score(self, questions: Sequence[str], answers: Sequence[str]) -> np.ndarray:
        """h(q, a) for each (question, answer), float64, batched."""
        if self.head is not None:
            from judges.reward.encoder import embed_texts
            from judges.reward.features import head_scores, pair_features

            backbone = self.metadata["backbone"]
            distinct = sorted(set(questions))
            q_rows = {text: i for i, text in enumerate(distinct)}
            q_vectors = embed_texts(distinct, backbone=backbone)
            a_vectors = embed_texts(list(answers), backbone=backbone)
            q_matrix = q_vectors[[q_rows[text] for text in questions]]
            return head_scores(self.head, pair_features(q_matrix, a_vectors))
        from judges.reward.hf import device_pick, hf_scores, max_length_of

        return hf_scores(
            self.hf_model,
            self.hf_tokenizer,
            list(questions),
            list(answers),
            device=device_pick(),
            max_length=max_length_of(self.hf_model, self.hf_tokenizer),
        )


@functools.lru_cache(maxsize=4)
def _load_cached(root: str, name: str, weights_hash: str) -> LoadedModel:
    folder = Path(root) / name
    metadata = artifact_metadata(name)
    if metadata["kind"] == KIND_HEAD:
        from safetensors.torch import load_file

        from judges.reward.features import Head

        head = Head(int(metadata["in_features"]), int(metadata["hidden"]))
        head.load_state_dict(load_file(str(folder / HEAD_WEIGHTS)))
        head.eval()
        return LoadedModel(metadata=metadata, head=head)
    from judges.reward.hf import hf_load

    model, tokenizer = hf_load(folder / MODEL_FOLDER)
    return LoadedModel(metadata=metadata, hf_model=model, hf_tokenizer=tokenizer)


def artifact_load(name: str) -> LoadedModel:
    """Load an artifact (cached per process by folder and weights hash)."""
    metadata = artifact_metadata(name)
    return _load_cached(str(artifacts_root()), name, str(metadata.get("weights_hash", "")))
