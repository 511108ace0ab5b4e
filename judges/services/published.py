"""Import the verdicts a benchmark published for an automatic judge (MT-Bench's GPT-4 pair
verdicts, for one) as one imported run of an imported judge, with one call per pair.

The pairs are annotation's rows, stored first by annotation.services.published; this module only
writes judges' tables: the judge (created if missing), the study's imported run of it (one per
study and judge, reused), the run's pairs and its calls at the given turns, which it replaces.

Locking: one transaction with the study row locked (`SELECT ... FOR UPDATE`), so two imports into
one study do not both create a run. Called inside a wider transaction, it becomes part of it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from annotation.models import Pair, Preference, Study
from core.errors import ApplicationError
from judges.models import Judge, JudgeCall, JudgeRun


class PublishedVerdictsError(ApplicationError, ValueError):
    """Verdicts that cannot be stored as given; the message says which and why."""


@dataclass(frozen=True)
class PublishedVerdict:
    """One published verdict on a stored pair: the canonical preference, the source's own label
    (kept as the call's verdict label, "tie (inconsistent)" for one) and the source record."""

    pair_id: int
    preference: Preference
    label: str
    record: dict[str, Any]


@dataclass(frozen=True)
class PublishedVerdictsResult:
    run: JudgeRun
    call_count: int


def published_verdicts_import(
    *,
    study: Study,
    judge_name: str,
    model_name: str,
    order_policy: Judge.OrderPolicy,
    call_order: JudgeCall.Order,
    run_note: str,
    turns: Collection[int],
    verdicts: Sequence[PublishedVerdict],
) -> PublishedVerdictsResult:
    """Store `verdicts` as done calls of the study's imported run of the judge `judge_name`.

    The judge is created as an imported one with `model_name` and `order_policy`; each call is in
    `call_order` (MT-Bench's verdicts combine both orders: JudgeCall.Order.BOTH), keeps the source
    record as its request and raw output, and reports `model_name` as the model's version. The
    run's calls on pairs at `turns` are replaced. Raise PublishedVerdictsError, before anything is
    written, when a verdict names a pair twice, a pair of another study, or one at another turn,
    or when a judge of that name exists and is not an imported one.
    """
    pair_ids = [v.pair_id for v in verdicts]
    if len(set(pair_ids)) != len(pair_ids):
        twice = sorted({p for p in pair_ids if pair_ids.count(p) > 1})
        raise PublishedVerdictsError(f"pairs {twice[:5]} have more than one verdict")
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        found = set(
            Pair.objects.filter(study=study, pk__in=pair_ids, turn__in=turns).values_list(
                "pk", flat=True
            )
        )
        missing = sorted(set(pair_ids) - found)
        if missing:
            raise PublishedVerdictsError(
                f"pairs {missing[:5]} are not pairs of study {study.slug!r} at turns "
                f"{sorted(turns)}"
            )
        judge, _ = Judge.objects.get_or_create(
            name=judge_name,
            defaults={
                "kind": Judge.Kind.IMPORTED,
                "model_name": model_name,
                "order_policy": order_policy,
            },
        )
        if judge.kind != Judge.Kind.IMPORTED:
            raise PublishedVerdictsError(
                f"judge {judge_name!r} exists and is a {judge.get_kind_display()} judge, not an "
                "imported one; rename it or import under another name"
            )
        run = (
            JudgeRun.objects.filter(judge=judge, study=study, status=JudgeRun.Status.IMPORTED)
            .order_by("pk")
            .first()
        )
        if run is None:
            run = JudgeRun.objects.create(
                judge=judge, study=study, status=JudgeRun.Status.IMPORTED, note=run_note
            )
        JudgeCall.objects.filter(run=run, pair__turn__in=turns).delete()
        calls = JudgeCall.objects.bulk_create(
            [
                JudgeCall(
                    run=run,
                    pair_id=v.pair_id,
                    order=call_order,
                    status=JudgeCall.Status.DONE,
                    request=v.record,
                    raw_output=json.dumps(v.record, sort_keys=True),
                    preference=v.preference,
                    verdict_label=v.label,
                    model_version_reported=model_name,
                )
                for v in verdicts
            ],
            batch_size=2000,
        )
        run.pairs.add(*sorted(set(pair_ids)))
    return PublishedVerdictsResult(run=run, call_count=len(calls))
