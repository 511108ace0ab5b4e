"""How many judge runs one study may have queued or running at once.

A run fans out one call per pair and order: twenty runs started together on one study (13,440
calls) were all accepted, and filled the judge queue and the budget. A study may have at most
CONCORD_STUDY_MAX_ACTIVE_RUNS runs pending or running (LLM, PL and panel runs alike: a panel
run is running until its combination is written); a start or resume past that is refused with
the runs that hold the places.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError

from annotation.models import Study
from core.errors import ApplicationError
from judges.models import JudgeRun

ACTIVE_RUN_STATUSES = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)


class RunLimitReached(ApplicationError, ValidationError):  # type: ignore[misc]  # code, message: same use
    """The study already has as many active runs as it may; the message names them."""

    http_status = 409


def study_run_place_take(*, study: Study, exclude_run_id: int | None = None) -> None:
    """Lock the study's row and raise RunLimitReached when it already has
    CONCORD_STUDY_MAX_ACTIVE_RUNS runs pending or running (`exclude_run_id` not counted: the run
    being resumed).

    Call inside the transaction that then creates or resumes the run: the row lock (FOR NO KEY
    UPDATE, so rows that merely reference the study are not blocked) is held until it commits,
    so two starts are counted one after the other and cannot both take the last place.
    """
    limit = settings.CONCORD_STUDY_MAX_ACTIVE_RUNS
    Study.objects.select_for_update(no_key=True).filter(pk=study.pk).values_list(
        "pk", flat=True
    ).get()
    active = JudgeRun.objects.filter(study_id=study.pk, status__in=ACTIVE_RUN_STATUSES)
    if exclude_run_id is not None:
        active = active.exclude(pk=exclude_run_id)
    runs = list(active.select_related("judge").order_by("pk")[: limit + 1])
    if len(runs) < limit:
        return
    named = ", ".join(
        f"run {run.pk} ({run.judge.name}, {run.get_status_display().lower()})" for run in runs
    )
    raise RunLimitReached(
        f"study {study.slug!r} already has {len(runs)} judge runs queued or running ({named}); "
        f"a study may have at most {limit} at once (CONCORD_STUDY_MAX_ACTIVE_RUNS): wait for "
        "one to finish or cancel one"
    )
