"""Reads for the references page: the study's reference categories, which of their prompts have
a reference, and the reference ledger (judges.models.ReferenceCall) per judge."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum

from annotation.models import Prompt, Study
from judges.models import ReferenceCall

# Failed rows listed on the page, newest first; the admin and the database hold every one.
FAILED_SHOWN = 50


@dataclass(frozen=True)
class ReferenceCounts:
    prompts: int
    with_reference: int
    imported: int

    @property
    def missing(self) -> int:
        return self.prompts - self.with_reference


@dataclass(frozen=True)
class LedgerLine:
    judge: str
    done: int
    failed: int
    open: int
    tokens_in: int
    tokens_out: int
    cost_usd: Decimal


def reference_counts(*, study: Study) -> ReferenceCounts:
    """How many prompts of the study's reference categories there are, how many have a
    reference, and how many of those were imported (one grouped read)."""
    counts = Prompt.objects.filter(
        study=study, category__in=list(study.reference_categories or [])
    ).aggregate(
        prompts=Count("pk"),
        with_reference=Count("pk", filter=Q(reference_turns__isnull=False)),
        imported=Count("pk", filter=Q(reference_source="imported")),
    )
    return ReferenceCounts(counts["prompts"], counts["with_reference"], counts["imported"])


def reference_ledger(*, study: Study) -> list[LedgerLine]:
    """Per reference judge of the study: its rows by status, and their tokens and cost."""
    rows = (
        ReferenceCall.objects.filter(study=study)
        .values("judge__name")
        .annotate(
            done=Count("pk", filter=Q(status=ReferenceCall.Status.DONE)),
            failed=Count("pk", filter=Q(status=ReferenceCall.Status.FAILED)),
            open=Count(
                "pk",
                filter=Q(status__in=[ReferenceCall.Status.PENDING, ReferenceCall.Status.RUNNING]),
            ),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            cost=Sum("cost_usd"),
        )
        .order_by("judge__name")
    )
    return [
        LedgerLine(
            row["judge__name"],
            row["done"],
            row["failed"],
            row["open"],
            row["tokens_in"] or 0,
            row["tokens_out"] or 0,
            row["cost"] or Decimal(0),
        )
        for row in rows
    ]


def reference_failures(*, study: Study) -> QuerySet[ReferenceCall]:
    """The study's failed reference rows, newest first, with their prompt and judge."""
    return (
        ReferenceCall.objects.filter(study=study, status=ReferenceCall.Status.FAILED)
        .select_related("prompt", "judge")
        .order_by("-finished_at", "-pk")[:FAILED_SHOWN]
    )
