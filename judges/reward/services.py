"""Training a PL model: validate and queue, run on a worker, cancel, retry, reconcile.

The training row in PostgreSQL is the durable state; the broker only carries its id. Every
state change is a conditional UPDATE that must change exactly one row (claim: pending ->
running with attempts + 1; each epoch: only while this attempt still holds the row), so a
duplicated message does nothing and a cancel stops the loop at the next epoch. A worker killed
mid-training leaves a running row whose heartbeat stops; the reconciler marks it failed, and a
retry queues it again. Nothing is registered until the artifact folder is complete.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.expressions import Func
from django.db.models.functions import Coalesce
from django.db.models.query import QuerySet
from django.utils import timezone

from annotation.models import Study
from core.broker import BrokerUnavailable, broker_check
from core.errors import ApplicationError
from core.tasks import failure_reason
from judges.models import Judge, PLTraining
from judges.reward import data as data_module
from judges.reward.data import TrainingInputError, study_data
from judges.reward.encoder import DEFAULT_BACKBONE, BackboneNotFound, backbone_path
from judges.reward.losses import RECIPES, parse_k, recipe_name
from judges.reward.resend import LostMessage, resend_take, resend_unclaimed
from judges.reward.scoring import queue_on_commit
from judges.services.runs import _check_may_run

logger = logging.getLogger(__name__)

TASK_TRAIN = "judges.pl_train"
BACKBONE_HEAD = "head"
BACKBONE_FINETUNE = "finetune"
BACKBONE_HF = "hf"
BACKBONE_MODES = (BACKBONE_HEAD, BACKBONE_FINETUNE, BACKBONE_HF)


class TrainingCancelled(ApplicationError):
    """The training was cancelled (or taken by another attempt) while it ran."""

    http_status = 409


@dataclass(frozen=True)
class TrainingRequest:
    """What a researcher asks for; every field lands in the training's params and artifact."""

    name: str
    recipe: str = "listwise"
    k: str = "all"
    sources: tuple[str, ...] = (data_module.SOURCE_RANKED, data_module.SOURCE_HUMAN)
    ties: str = data_module.TIES_DROP
    likert_weights: bool = False
    mode: str = BACKBONE_HEAD
    backbone: str = DEFAULT_BACKBONE
    checkpoint: str = ""
    epochs: int = 40
    learning_rate: float = 1e-3
    hidden: int = 256
    batch_size: int = 64
    holdout: float = 0.2
    seed: int | None = None
    # Start a run of the new judge over the study's pairs once it is registered.
    run_after: bool = False

    def params(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "k": self.k,
            "sources": sorted(self.sources),
            "ties": self.ties,
            "likert_weights": self.likert_weights,
            "mode": self.mode,
            "backbone": self.backbone,
            "checkpoint": self.checkpoint,
            "learning_rate": self.learning_rate,
            "hidden": self.hidden,
            "batch_size": self.batch_size,
            "holdout": self.holdout,
            "run_after": self.run_after,
        }


def training_request_check(*, study: Study, request: TrainingRequest) -> dict[str, int]:
    """Raise ValidationError naming every problem with the request; return the data's counts.

    Reads the study's rows (no encoding, no training): cheap enough for a web request.
    """
    errors: dict[str, str] = {}
    if not request.name.strip():
        errors["name"] = "Name the model (it becomes the judge's name)."
    elif Judge.objects.filter(name=request.name).exists():
        errors["name"] = f"a judge named {request.name!r} exists already"
    if request.recipe not in RECIPES:
        errors["recipe"] = f"unknown recipe {request.recipe!r}; one of {list(RECIPES)}"
    try:
        k = parse_k(request.k)
    except ValueError as exc:
        errors["k"] = str(exc)
        k = None
    if request.epochs < 1 or request.epochs > 10_000:
        errors["epochs"] = "epochs must be between 1 and 10000"
    if request.learning_rate <= 0:
        errors["learning_rate"] = "the learning rate must be positive"
    if request.hidden < 1 or request.batch_size < 1:
        errors["hidden"] = "hidden size and batch size must be positive"
    if request.mode not in BACKBONE_MODES:
        errors["mode"] = f"unknown backbone mode {request.mode!r}; one of {list(BACKBONE_MODES)}"
    elif request.mode == BACKBONE_HF:
        from judges.reward.hf import CheckpointError, checkpoint_check, checkpoint_resolve

        try:
            # Only folders under the checkpoints root, and the errors name the folder as given.
            checkpoint_check(
                checkpoint_resolve(request.checkpoint), name=request.checkpoint.strip()
            )
        except CheckpointError as exc:
            errors["checkpoint"] = str(exc)
    else:
        try:
            backbone_path(request.backbone)
        except BackboneNotFound as exc:
            errors["backbone"] = str(exc)
    if set(request.sources) == {data_module.SOURCE_HUMAN} and k not in (None, 2):
        errors["k"] = "human labels are pairs (K = 2); K applies to ranked lists only"
    if errors:
        raise ValidationError(errors)
    try:
        found = study_data(
            study=study,
            sources=request.sources,
            k=k,
            recipe=request.recipe,
            ties=request.ties,
            likert_weights=request.likert_weights,
        )
    except TrainingInputError as exc:
        raise ValidationError({"data": str(exc)}) from exc
    return found.summary


def pl_training_start(*, study: Study, user: User, request: TrainingRequest) -> PLTraining:
    """Check the request and the study's data, then queue the training after commit.

    Raise PermissionDenied for a user who may not run judges on the study, ValidationError
    naming bad input, BrokerUnavailable when the broker does not answer; nothing is written then.
    """
    _check_may_run(user=user, study=study)
    summary = training_request_check(study=study, request=request)
    broker_check()
    seed = request.seed if request.seed is not None else random.SystemRandom().randrange(2**31)
    with transaction.atomic():
        training = PLTraining.objects.create(
            study=study,
            name=request.name,
            params=request.params(),
            seed=seed,
            epochs=request.epochs,
            data_summary=summary,
            created_by=user,
            queued_at=timezone.now(),
        )
        queue_on_commit(TASK_TRAIN, training.pk)
    return training


def pl_training_cancel(*, training: PLTraining, user: User) -> PLTraining:
    """Stop a pending or running training; the worker stops at the end of its epoch."""
    _check_may_run(user=user, study=training.study)
    changed = PLTraining.objects.filter(
        pk=training.pk, status__in=[PLTraining.Status.PENDING, PLTraining.Status.RUNNING]
    ).update(status=PLTraining.Status.CANCELLED, finished_at=timezone.now())
    training.refresh_from_db()
    if changed != 1:
        raise ValidationError(f"training {training.pk} is {training.status}; not cancelled")
    return training


def pl_training_retry(*, training: PLTraining, user: User) -> PLTraining:
    """Queue a failed or cancelled training again from the start (embeddings stay cached)."""
    _check_may_run(user=user, study=training.study)
    broker_check()
    with transaction.atomic():
        changed = PLTraining.objects.filter(
            pk=training.pk, status__in=[PLTraining.Status.FAILED, PLTraining.Status.CANCELLED]
        ).update(
            status=PLTraining.Status.PENDING,
            epoch=0,
            curve=[],
            error="",
            finished_at=None,
            # A new send: its grace period counts from now, and its re-sends afresh.
            queued_at=timezone.now(),
            resent_at=None,
            resends=0,
        )
        if changed != 1:
            training.refresh_from_db()
            raise ValidationError(
                f"training {training.pk} is {training.status}; only a failed or cancelled "
                "training can be retried"
            )
        queue_on_commit(TASK_TRAIN, training.pk)
    training.refresh_from_db()
    return training


def _mine(training_id: int, attempt: int) -> Any:
    """The training's row, only while this attempt still holds it."""
    return PLTraining.objects.filter(
        pk=training_id, status=PLTraining.Status.RUNNING, attempts=attempt
    )


def pl_training_execute(*, training_id: int) -> str:
    """Claim a pending training and run it to done, failed or cancelled; return the status.

    Holds no lock; each state change is one conditional UPDATE. The artifact folder is written
    completely before the judge row and the done status are written, in one transaction.
    """
    now = timezone.now()
    claimed = PLTraining.objects.filter(pk=training_id, status=PLTraining.Status.PENDING).update(
        status=PLTraining.Status.RUNNING,
        attempts=F("attempts") + 1,
        heartbeat_at=now,
        started_at=now,
        error="",
    )
    if claimed != 1:
        return "skipped"
    training = PLTraining.objects.select_related("study").get(pk=training_id)
    from judges.reward.pipeline import train_and_save

    folder = ""
    try:
        result = train_and_save(training=training, still_mine=_epoch_hook(training))
        folder = result.artifact
        with transaction.atomic():
            judge = Judge.objects.create(
                name=training.name,
                kind=Judge.Kind.PL,
                # The report names a source by judge and model: recipe and K say which PL model.
                model_name=(
                    f"{result.metadata['backbone_label']}, "
                    f"{recipe_name(result.metadata['recipe'], result.metadata['k'])}"
                )[:200],
                model_version=result.metadata["weights_hash"][:12],
                params={
                    "artifact": result.artifact,
                    "training": training.pk,
                    "recipe": result.metadata["recipe"],
                    "k": result.metadata["k"],
                    "mode": result.metadata["mode"],
                },
                order_policy=Judge.OrderPolicy.FIXED,
                order_invariant=True,
            )
            finished = _mine(training.pk, training.attempts).update(
                status=PLTraining.Status.DONE,
                judge=judge,
                metrics=result.metadata["metrics"],
                data_summary=result.metadata["data_summary"],
                data_hash=result.metadata["training_data_hash"],
                held_out_prompts=result.metadata["held_out_prompts"],
                artifact=result.artifact,
                finished_at=timezone.now(),
            )
            if finished != 1:
                raise TrainingCancelled
    except TrainingCancelled:
        _folder_drop(folder)
        return "cancelled"
    except IntegrityError as exc:
        _folder_drop(folder)
        return _fail(training, f"could not register the judge {training.name!r}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a failed training is recorded, not retried
        logger.exception("PL training %s failed", training.pk)
        _folder_drop(folder)
        return _fail(training, failure_reason(exc))
    if training.params.get("run_after") and training.created_by is not None:
        _run_after(training, judge)
    return "done"


def _run_after(training: PLTraining, judge: Judge) -> None:
    """Start a run of the new judge on the training's study (the demo's train-and-run)."""
    from judges.services.runs import judge_run_create

    try:
        judge_run_create(judge=judge, study=training.study, user=training.created_by)
    except (ValidationError, BrokerUnavailable) as exc:
        logger.warning("PL training %s: the run after it did not start: %s", training.pk, exc)


def _folder_drop(folder: str) -> None:
    if folder:
        from judges.reward.artifacts import artifact_remove

        artifact_remove(folder)


def _fail(training: PLTraining, message: str) -> str:
    _mine(training.pk, training.attempts).update(
        status=PLTraining.Status.FAILED, error=message[:5000], finished_at=timezone.now()
    )
    return "failed"


def _epoch_hook(training: PLTraining) -> Any:
    """Record an epoch's losses and the heartbeat; raise TrainingCancelled if no longer ours."""

    def hook(epoch: int, curve: list[dict[str, float | None]]) -> None:
        changed = _mine(training.pk, training.attempts).update(
            epoch=epoch, curve=curve, heartbeat_at=timezone.now()
        )
        if changed != 1:
            raise TrainingCancelled

    return hook


def _unclaimed() -> QuerySet[PLTraining]:
    """Pending trainings: no worker claimed them (a claim makes them running)."""
    return PLTraining.objects.filter(status=PLTraining.Status.PENDING)


def last_queued_at() -> Func:
    """When a training's message was last sent (a training from before `queued_at` was kept:
    its creation)."""
    return Coalesce("queued_at", "created_at")


# A training's message, sent again by pl_trainings_reconcile when lost (judges.reward.resend).
TRAINING_MESSAGE = LostMessage(
    what="PL training",
    task=TASK_TRAIN,
    grace_setting="CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS",
    unclaimed=_unclaimed,
    last_sent=last_queued_at,
    queued_field="queued_at",
    resent_field="resent_at",
    count_field="resends",
)


def pl_training_resend_take(*, training_id: int, before: datetime, now: datetime) -> bool:
    """Take the re-send of a pending training last sent before `before`; True when this call
    took it (the caller then sends the message). A training a worker claimed meanwhile is
    running, and is left alone (see judges.reward.resend.resend_take)."""
    return resend_take(TRAINING_MESSAGE, pk=training_id, before=before, now=now)


def pl_trainings_reconcile() -> int:
    """Mark failed the running trainings whose heartbeat stopped (their worker died), and send
    again the message of pending ones no worker claimed within
    CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS (it was lost; judges.reward.resend); return
    how many changed."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.CONCORD_REWARD_HEARTBEAT_STALE_SECONDS)
    changed = PLTraining.objects.filter(
        status=PLTraining.Status.RUNNING, heartbeat_at__lt=stale
    ).update(
        status=PLTraining.Status.FAILED,
        error="the worker stopped (no heartbeat for "
        f"{settings.CONCORD_REWARD_HEARTBEAT_STALE_SECONDS} s); retry to train again",
        finished_at=now,
    )
    if changed:
        logger.warning("marked %d PL trainings failed: their worker stopped", changed)
    return int(changed) + resend_unclaimed(TRAINING_MESSAGE, now)
