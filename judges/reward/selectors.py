"""Reads of PL trainings, each checked against the requesting user, and of the PL runs' stored
contrast scorings (for the report, which loads no model)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from annotation.selectors.studies import study_list_for_user
from judges.models import ContrastScoring, PLTraining
from judges.reward.arrays import array_from_bytes


def pl_training_list_for_user(*, user: User | AnonymousUser) -> QuerySet[PLTraining]:
    """Trainings on studies the user may read (none for annotators and outsiders)."""
    return PLTraining.objects.filter(study__in=study_list_for_user(user=user)).select_related(
        "study", "judge"
    )


def pl_training_status(*, training: PLTraining) -> dict[str, Any]:
    """What the training page polls: status, epoch, last losses, metrics, error."""
    last = training.curve[-1] if training.curve else {}
    return {
        "status": training.status,
        "terminal": training.is_terminal,
        "epoch": training.epoch,
        "epochs": training.epochs,
        "train_loss": last.get("train_loss"),
        "val_loss": last.get("val_loss"),
        "metrics": training.metrics,
        "error": training.error,
        "judge": training.judge.name if training.judge else None,
        "queue": pl_training_queue_state(training=training),
    }


WAITING = "waiting for a worker on the reward_model queue (celery -A config worker -Q reward_model)"


def pl_training_queue_state(*, training: PLTraining) -> str:
    """Where a pending training's message is, as a sentence for its page ("" once claimed).

    Re-sent (its message was lost, no worker claimed it): when, how long ago and how often;
    else how long ago it was queued, and past the grace period that the reconciler sends it
    again (judges.reward.resend).
    """
    from judges.reward.resend import queued_text, resent_text
    from judges.reward.services import TRAINING_MESSAGE

    if training.status != PLTraining.Status.PENDING:
        return ""
    if training.resent_at is not None:
        lost = resent_text(
            TRAINING_MESSAGE,
            resent_at=training.resent_at,
            resends=training.resends,
            job="training",
        )
        return f"{lost}); {WAITING}"
    ago, late = queued_text(TRAINING_MESSAGE, queued_at=training.queued_at or training.created_at)
    return f"Queued {ago} s ago, {WAITING}{late}"


@dataclass(frozen=True)
class ContrastScores:
    """What one PL run's model gives a contrast set (judges.models.ContrastScoring): `scores`
    float64 [4 * pairs], `query_vectors` [4 * pairs, d], `answer_ids` int64 [n] and
    `answer_vectors` [n, d], as computed (judges.reward.contrast) and as stored."""

    pairs: int
    scores: np.ndarray
    query_vectors: np.ndarray
    answer_ids: np.ndarray
    answer_vectors: np.ndarray
    backbone: str
    temperature: float


def contrast_scorings_read(
    *, contrast_set_id: int, run_ids: Sequence[int]
) -> dict[int, ContrastScores]:
    """The done scorings of the contrast set by the runs among `run_ids`, by run id; a run
    without one (not scored yet, running, failed) is absent. Loads no model."""
    rows = ContrastScoring.objects.filter(
        contrast_set_id=contrast_set_id,
        run_id__in=list(run_ids),
        status=ContrastScoring.Status.DONE,
    ).order_by("run_id")
    return {
        row.run_id: ContrastScores(
            pairs=row.pairs,
            scores=array_from_bytes(row.scores),
            query_vectors=array_from_bytes(row.query_vectors),
            answer_ids=array_from_bytes(row.answer_ids),
            answer_vectors=array_from_bytes(row.answer_vectors),
            backbone=row.backbone,
            temperature=float(row.temperature or 1.0),
        )
        for row in rows
    }
