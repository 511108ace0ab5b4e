"""Reads of judge configurations, by the study they may be used in."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotation.models import Study
from annotation.selectors.checklist import ChecklistItem
from judges.models import Judge
from judges.services.judges import RUNNABLE_KINDS, judge_readiness


def judge_list_for_study(*, study: Study) -> QuerySet[Judge]:
    """Judges a study's members may see and run: the admin's shared ones and the study's own."""
    return Judge.objects.filter(Q(study__isnull=True) | Q(study=study))


def judge_get_for_study(*, study: Study, judge_id: int) -> Judge:
    """One of those judges; raise Judge.DoesNotExist for any other (another study's own)."""
    return judge_list_for_study(study=study).get(pk=judge_id)


def judges_checklist_item(study: Study) -> ChecklistItem:
    """The launch checklist's line about judges: which are ready to run (advice, not blocking)."""
    ready: list[str] = []
    waiting: list[str] = []
    for judge in judge_list_for_study(study=study).filter(kind__in=RUNNABLE_KINDS):
        problem = judge_readiness(judge=judge)
        (waiting if problem else ready).append(
            f"{judge.name} ({problem})" if problem else judge.name
        )
    parts = [f"{len(ready)} ready" + (f": {', '.join(ready)}" if ready else "")]
    if waiting:
        parts.append(f"{len(waiting)} not ready: {', '.join(waiting)}")
    return ChecklistItem(
        key="judges",
        label="Judges configured",
        ok=bool(ready),
        detail="; ".join(parts),
        blocking=False,
        link="judges:run_list",
    )
