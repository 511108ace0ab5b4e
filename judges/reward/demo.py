"""The demo's PL model: trained on the demo study's ranked lists on the demo's worker, then run."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError

from annotation.models import Study
from core.broker import BrokerUnavailable
from judges.models import Judge, PLTraining
from judges.reward.data import SOURCE_HUMAN, SOURCE_RANKED
from judges.reward.services import TrainingRequest, pl_training_start

DEMO_PL_NAME = "PL demo (listwise, K=all)"


def demo_pl_model_queue(*, study: Study, username: str = "demo-researcher") -> str:
    """Queue the demo PL model's training (then a run of it) unless it exists; say what happened.

    Idempotent: a judge or an open training of that name means nothing is queued again.
    """
    if Judge.objects.filter(name=DEMO_PL_NAME).exists():
        return f"{DEMO_PL_NAME!r}: trained"
    open_training = PLTraining.objects.filter(
        name=DEMO_PL_NAME, status__in=[PLTraining.Status.PENDING, PLTraining.Status.RUNNING]
    ).first()
    if open_training is not None:
        return f"{DEMO_PL_NAME!r}: training {open_training.pk} is {open_training.status}"
    user = User.objects.filter(username=username).first()
    if user is None:
        return f"{DEMO_PL_NAME!r}: not queued (no user {username!r})"
    request = TrainingRequest(
        name=DEMO_PL_NAME,
        sources=(SOURCE_RANKED, SOURCE_HUMAN),
        epochs=40,
        hidden=64,
        batch_size=8,
        holdout=0.34,
        seed=0,
        run_after=True,
    )
    try:
        training = pl_training_start(study=study, user=user, request=request)
    except ValidationError as exc:
        return f"{DEMO_PL_NAME!r}: not queued ({'; '.join(exc.messages)})"
    except (BrokerUnavailable, PermissionDenied) as exc:
        return f"{DEMO_PL_NAME!r}: not queued ({exc})"
    return (
        f"{DEMO_PL_NAME!r}: training {training.pk} queued on the reward_model worker; it runs "
        "on the study's pairs when done"
    )
