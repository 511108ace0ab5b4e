"""The choices a researcher may filter a study's analysis by."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db.models import Q

from annotation.models import Pair, Study
from leaderboard.selectors.frames import VoteFilters, study_judge_sources

# How long choices stay cached under one fingerprint (a change of the data changes the key).
CHOICES_CACHE_SECONDS = 3600


def study_filter_choices(*, study: Study, fingerprint: str | None = None) -> dict[str, list[Any]]:
    """Categories, turns and judge runs a researcher may filter the study's analysis by.

    Reading them scans the study's pairs (distinct values only travel), so with the study's data
    fingerprint (`selectors.snapshots.study_data_fingerprint`) they are kept in the cache under
    it: a pair or judge run added or removed changes the fingerprint, and a page served from a
    current report then reads them once per change of the data, not on every request. (A judge
    renamed in the admin shows its new name after the next change or within the hour.)"""
    key = f"leaderboard:filter-choices:{study.pk}:{fingerprint}" if fingerprint else None
    if key is not None:
        found: dict[str, list[Any]] | None = cache.get(key)
        if found is not None:
            return found
    pairs = Pair.objects.filter(study=study).order_by()
    categories = sorted(set(pairs.values_list("prompt__category", flat=True).distinct()) - {""})
    turns = sorted(set(pairs.values_list("turn", flat=True).distinct()))
    runs = [
        {"id": s.run_id, "name": s.name}
        for s in study_judge_sources(study=study, filters=VoteFilters())
    ]
    has_gold = pairs.filter(Q(is_gold=True)).exists()
    choices: dict[str, list[Any]] = {
        "categories": categories,
        "turns": turns,
        "runs": runs,
        "has_gold": [has_gold],
    }
    if key is not None:
        cache.set(key, choices, CHOICES_CACHE_SECONDS)
    return choices
