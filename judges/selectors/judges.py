"""Reads of judge configurations, by the study they may be used in."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotation.models import Pair, Study
from annotation.selectors.checklist import ChecklistItem
from judges.kinds import RUNNABLE_KINDS
from judges.models import Judge
from judges.services.judges import judge_readiness


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


PREVIEW_PAIR_CHOICES = 40


def template_preview_pairs(*, study: Study) -> list[Pair]:
    """Pairs to preview a template on: the first of each category and turn (so a reference
    category and a later turn are there to pick), then the study's first pairs, up to
    PREVIEW_PAIR_CHOICES, with their prompts."""
    pairs = Pair.objects.filter(study=study).select_related("prompt")
    firsts = list(
        pairs.order_by("prompt__category", "turn", "pk").distinct("prompt__category", "turn")[
            :PREVIEW_PAIR_CHOICES
        ]
    )
    chosen = {pair.pk: pair for pair in firsts}
    for pair in pairs.order_by("pk")[:PREVIEW_PAIR_CHOICES]:
        if len(chosen) >= PREVIEW_PAIR_CHOICES:
            break
        chosen.setdefault(pair.pk, pair)
    return sorted(chosen.values(), key=lambda pair: pair.pk)


def template_preview_pair(*, study: Study, pair_id: int | None) -> Pair | None:
    """The study's pair with that id, else its first pair, with the prompt and both answers;
    None when the study has no pair."""
    pairs = Pair.objects.filter(study=study).select_related("prompt", "answer_a", "answer_b")
    chosen = pairs.filter(pk=pair_id).first() if pair_id is not None else None
    return chosen or pairs.order_by("pk").first()
