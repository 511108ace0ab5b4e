"""The choices a researcher may filter a study's analysis by."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from annotation.models import Pair, Study
from leaderboard.selectors.frames import VoteFilters, study_judge_sources


def study_filter_choices(*, study: Study) -> dict[str, list[Any]]:
    """Categories, turns and judge runs a researcher may filter the study's analysis by."""
    pairs = Pair.objects.filter(study=study).order_by()
    categories = sorted(set(pairs.values_list("prompt__category", flat=True)) - {""})
    turns = sorted(set(pairs.values_list("turn", flat=True)))
    runs = [
        {"id": s.run_id, "name": s.name}
        for s in study_judge_sources(study=study, filters=VoteFilters())
    ]
    has_gold = pairs.filter(Q(is_gold=True)).exists()
    return {"categories": categories, "turns": turns, "runs": runs, "has_gold": [has_gold]}
