"""One training from a study's rows to a complete artifact folder (run on a worker).

Steps: read and check the study's examples (:mod:`judges.reward.data`), split them by prompt
with the training's seed, turn answers into model inputs (cached embeddings and the head's
features, or question-answer text pairs for a Hugging Face model), train (:mod:`training`),
measure on the held-out prompts (AdvisorQA's Table 3 measures, and the accuracy on held-out
human pairs), fit the temperature of the verdicts' probability on the held-out ranked pairs
(:mod:`judges.reward.calibration`; none when nothing is held out), write the artifact
(:mod:`artifacts`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from judges.models import PLTraining
from judges.reward import artifacts, encoder
from judges.reward.calibration import pair_differences, temperature_fit
from judges.reward.data import StudyData, split_prompts, study_data
from judges.reward.features import FEATURES, head_new, head_scorer, head_scores, pair_features
from judges.reward.losses import parse_k
from judges.reward.training import Examples, TrainSettings, torch_threads, train
from rankeval.listwise import listwise_scores

EpochRecorder = Callable[[int, list[dict[str, float | None]]], None]


@dataclass(frozen=True)
class TrainedArtifact:
    artifact: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Indexed:
    """The study's answers as rows 0..n-1, with the examples split by prompt over those rows."""

    answer_ids: list[int]
    questions: list[str]
    answers: list[str]
    train: Examples
    held_out: Examples
    held_out_prompts: list[int]


def index_examples(found: StudyData, *, holdout: float, seed: int) -> Indexed:
    """Rows for the answers, and the lists and pairs split by prompt into train and held-out."""
    answer_ids = sorted(found.answers)
    row = {answer_id: i for i, answer_id in enumerate(answer_ids)}
    prompts = {prompt for prompt, _ in found.lists} | {p for p, _, _, _ in found.pairs}
    train_prompts, held_prompts = split_prompts(prompts, holdout=holdout, seed=seed)

    def examples(chosen: set[int]) -> Examples:
        return Examples(
            lists=tuple(tuple(row[a] for a in ids) for p, ids in found.lists if p in chosen),
            pairs=tuple((row[b], row[w], wt) for p, b, w, wt in found.pairs if p in chosen),
        )

    return Indexed(
        answer_ids=answer_ids,
        questions=[found.questions[found.answers[a][0]] for a in answer_ids],
        answers=[found.answers[a][1] for a in answer_ids],
        train=examples(train_prompts),
        held_out=examples(held_prompts),
        held_out_prompts=sorted(held_prompts),
    )


def pair_accuracy(scores: np.ndarray, pairs: tuple[tuple[int, int, float], ...]) -> float | None:
    """Weighted share of pairs whose better side scores higher (a tie of scores counts half)."""
    if not pairs:
        return None
    right = sum(
        w * (1.0 if scores[b] > scores[x] else 0.5 if scores[b] == scores[x] else 0.0)
        for b, x, w in pairs
    )
    return float(right / sum(w for _, _, w in pairs))


def measures(scores: np.ndarray, examples: Examples) -> dict[str, Any]:
    """AdvisorQA's Table 3 measures on the lists, and the accuracy on the human pairs."""
    table = listwise_scores([scores[list(ids)] for ids in examples.lists])
    return {
        "lists": table.lists,
        "ndcg@2": table.ndcg[2],
        "ndcg@3": table.ndcg[3],
        "ndcg@5": table.ndcg[5],
        "first_vs_second": table.first_vs_second,
        "first_vs_last": table.first_vs_last,
        "pairs": len(examples.pairs),
        "pair_accuracy": pair_accuracy(scores, examples.pairs),
    }


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _nan_to_none(item) for key, item in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def train_and_save(*, training: PLTraining, still_mine: EpochRecorder) -> TrainedArtifact:
    """Train the model a training row describes and write its artifact; return its name.

    `still_mine(epoch, curve)` is called after every epoch and raises to stop the training.
    """
    params = training.params
    k = parse_k(params["k"])
    found = study_data(
        study=training.study,
        sources=params["sources"],
        k=k,
        recipe=params["recipe"],
        ties=params["ties"],
        likert_weights=params["likert_weights"],
    )
    indexed = index_examples(found, holdout=float(params["holdout"]), seed=training.seed)
    settings = TrainSettings(
        recipe=params["recipe"],
        k=k,
        epochs=training.epochs,
        learning_rate=float(params["learning_rate"]),
        batch_size=int(params["batch_size"]),
        hidden=int(params["hidden"]),
        seed=training.seed,
    )
    curve: list[dict[str, float | None]] = []

    def on_epoch(epoch: int, train_loss: float, val_loss: float | None) -> bool:
        curve.append({"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss})
        still_mine(epoch, list(curve))
        return True

    started = time.perf_counter()
    mode = params["mode"]
    summary = dict(found.summary)
    save: dict[str, Any] = {}
    if mode == "head":
        backbone = params["backbone"]
        distinct_questions = sorted(set(indexed.questions))
        q_row = {text: i for i, text in enumerate(distinct_questions)}
        texts = distinct_questions + indexed.answers
        summary["texts_truncated"] = encoder.count_truncated(texts, backbone=backbone)
        embedded = encoder.embed(texts, backbone=backbone)
        summary["texts_encoded"], summary["texts_cached"] = embedded.encoded, embedded.cached
        q_vectors = embedded.vectors[: len(distinct_questions)]
        a_vectors = embedded.vectors[len(distinct_questions) :]
        features = pair_features(q_vectors[[q_row[q] for q in indexed.questions]], a_vectors)
        head = head_new(in_features=features.shape[1], hidden=settings.hidden, seed=settings.seed)
        with torch_threads(1):
            train(
                model=head,
                scorer=head_scorer(head, torch.from_numpy(features)),
                train_examples=indexed.train,
                validation=indexed.held_out,
                settings=settings,
                device=torch.device("cpu"),
                on_epoch=on_epoch,
            )
            scores = head_scores(head, features)
        save = {"head_state": head.state_dict()}
        model_info = {
            "kind": artifacts.KIND_HEAD,
            "backbone": backbone,
            "backbone_label": backbone,
            "backbone_hash": encoder.backbone_hash(backbone),
            "features": FEATURES,
            "in_features": int(features.shape[1]),
            "hidden": settings.hidden,
            "device": "cpu",
        }
    else:
        from judges.reward import hf

        torch.manual_seed(settings.seed)
        if mode == "finetune":
            source = str(encoder.backbone_path(params["backbone"]))
            model, tokenizer = hf.hf_load(source, fresh_head=True)
            label = f"{params['backbone']} (fine-tuned)"
        else:
            # Resolved again here: the root is checked when the worker reads the folder too.
            source = str(hf.checkpoint_resolve(params["checkpoint"]))
            model, tokenizer = hf.hf_load(source)
            label = params["checkpoint"]
        device = hf.device_pick()
        model.to(device)
        max_length = hf.max_length_of(model, tokenizer)
        summary["texts_truncated"] = hf.count_truncated_pairs(
            tokenizer, indexed.questions, indexed.answers, max_length
        )
        train(
            model=model,
            scorer=hf.hf_scorer(
                model,
                tokenizer,
                indexed.questions,
                indexed.answers,
                device=device,
                max_length=max_length,
            ),
            train_examples=indexed.train,
            validation=indexed.held_out,
            settings=settings,
            device=device,
            on_epoch=on_epoch,
            autocast=device.type == "cuda",
        )
        scores = hf.hf_scores(
            model,
            tokenizer,
            indexed.questions,
            indexed.answers,
            device=device,
            max_length=max_length,
        )
        model.to("cpu")
        save = {"hf_model": model, "hf_tokenizer": tokenizer}
        model_info = {
            "kind": artifacts.KIND_HF,
            "backbone": source,
            "backbone_label": label,
            "backbone_hash": artifacts.file_hash(Path(source)),
            "max_length": max_length,
            "device": device.type,
            "mixed_precision": "bfloat16" if device.type == "cuda" else "none",
        }
    seconds = time.perf_counter() - started
    held_diffs, held_weights = pair_differences(
        scores, indexed.held_out.lists, indexed.held_out.pairs
    )
    calibration = temperature_fit(held_diffs, held_weights)
    metrics = _nan_to_none(
        {
            "calibration": calibration.as_dict() if calibration else None,
            "held_out": measures(scores, indexed.held_out),
            "train": measures(scores, indexed.train),
            "train_seconds": seconds,
        }
    )
    name = f"pl-{training.pk}"
    metadata: dict[str, Any] = {
        "format": 1,
        "name": training.name,
        "training": training.pk,
        "study": training.study.slug,
        "recipe": params["recipe"],
        "k": params["k"],
        "mode": mode,
        "seed": training.seed,
        "settings": {**params, "epochs": training.epochs},
        "training_data_hash": found.data_hash(),
        "data_summary": summary,
        "held_out_prompts": indexed.held_out_prompts,
        "temperature": calibration.temperature if calibration else None,
        "metrics": metrics,
        "curve": _nan_to_none(curve),
        "versions": artifacts.library_versions(),
        **model_info,
    }
    artifacts.artifact_write(name=name, metadata=metadata, **save)
    return TrainedArtifact(artifact=name, metadata=metadata)
