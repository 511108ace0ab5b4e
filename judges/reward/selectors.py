"""Reads of PL trainings, each checked against the requesting user."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from annotation.selectors.studies import study_list_for_user
from judges.models import PLTraining


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
    }
