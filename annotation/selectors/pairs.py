"""Reads about a study's pairs, for researchers (they show system names; never for workers)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, QuerySet

from annotation.models import Pair, Study, System
from annotation.roles import Role
from annotation.selectors.studies import study_list_for_user, user_has_role


def user_may_generate_pairs(*, user: User | AnonymousUser, study: Study) -> bool:
    """True for admins and for members of the study who hold `annotation.add_pair`."""
    if not user.is_authenticated:
        return False
    if user_has_role(user, Role.ADMIN):
        return True
    return (
        user.has_perm("annotation.add_pair")
        and study_list_for_user(user=user).filter(pk=study.pk).exists()
    )


@dataclass(frozen=True)
class PairCounts:
    """A study's pair counts: all, gold, by source and by category (category, pairs, gold)."""

    total: int
    gold: int
    by_source: list[tuple[str, int, int]]
    by_category: list[tuple[str, int, int]]


def _counts_by(study: Study, field: str) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    rows = (
        Pair.objects.filter(study=study)
        .values_list(field, "is_gold")
        .annotate(n=Count("pk"))
        .order_by(field, "is_gold")
    )
    for key, is_gold, n in rows:
        pairs, gold = counts.get(key, (0, 0))
        counts[key] = (pairs + n, gold + (n if is_gold else 0))
    return counts


def pair_counts_for_study(*, study: Study) -> PairCounts:
    """Count the study's pairs by source and by prompt category, with gold counts, in two
    queries."""
    labels = dict(Pair.Source.choices)
    by_source = _counts_by(study, "source")
    by_category = _counts_by(study, "prompt__category")
    return PairCounts(
        total=sum(pairs for pairs, _ in by_source.values()),
        gold=sum(gold for _, gold in by_source.values()),
        by_source=[(labels.get(k, k), n, g) for k, (n, g) in by_source.items()],
        by_category=[(k or "(none)", n, g) for k, (n, g) in by_category.items()],
    )


def pair_list_for_study(*, study: Study) -> QuerySet[Pair]:
    """The study's pairs with their prompts and both systems, in a fixed number of queries."""
    return (
        Pair.objects.filter(study=study)
        .select_related("prompt", "answer_a__system", "answer_b__system")
        .order_by("prompt__external_id", "turn", "answer_a_id", "answer_b_id")
    )


def system_get_by_label(*, study: Study, label: str) -> System:
    """Return the study's system named `NAME` or `NAME:VERSION`.

    Raise System.DoesNotExist when none matches, and System.MultipleObjectsReturned when a bare
    name has several versions (the message lists them).
    """
    name, _, version = label.partition(":")
    systems = System.objects.filter(study=study, name=name)
    if version:
        try:
            return systems.get(version=version)
        except System.DoesNotExist as exc:
            raise System.DoesNotExist(
                f"Study {study.slug} has no system {name!r} with version {version!r}."
            ) from exc
    found = list(systems[:10])
    if not found:
        raise System.DoesNotExist(f"Study {study.slug} has no system named {name!r}.")
    if len(found) > 1:
        versions = ", ".join(f"{name}:{system.version}" for system in found)
        raise System.MultipleObjectsReturned(
            f"Study {study.slug} has several versions of {name!r}; name one of {versions}."
        )
    return found[0]


def system_list_for_study(*, study: Study) -> QuerySet[System]:
    """The study's systems, by name and version."""
    return System.objects.filter(study=study).order_by("name", "version")
