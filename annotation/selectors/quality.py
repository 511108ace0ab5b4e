"""Worker quality and pay, for researchers: gold accuracy, agreement, speed, side bias, pay rate.

Everything is recomputed from the judgment and ledger rows on each read; nothing is a counter.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count, Q, Sum

from annotation.models import Assignment, EntryLog, HumanJudgment, PayEntry, Study, Worker
from annotation.selectors.bonus import study_bonus_lines
from core.conventions import likert_collapse

# A worker whose median time per item is under this many seconds is flagged as too fast.
FAST_SECONDS = 5.0
# Participant ids that entered from one client address before each of them is flagged.
SHARED_ADDRESS_IDS = 3
# With at least this many Likert answers, a share of left choices outside LEFT_SHARE_RANGE is
# flagged: a careful worker's choices do not depend on the side.
LEFT_SHARE_MIN_ITEMS = 10
LEFT_SHARE_RANGE = (0.2, 0.8)


@dataclass(frozen=True)
class WorkerQuality:
    worker: Worker
    judgments: int
    gold_checked: int
    gold_correct: int
    majority_compared: int
    majority_agreed: int
    median_seconds: float | None
    left_share: float | None
    hourly_cents: int | None
    pending_cents: int
    approved_cents: int
    flags: tuple[str, ...] = field(default=())
    skipped: int = 0

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold_checked if self.gold_checked else None

    @property
    def hourly(self) -> str:
        return "" if self.hourly_cents is None else "$" + dollars(self.hourly_cents)

    @property
    def majority_agreement(self) -> float | None:
        return self.majority_agreed / self.majority_compared if self.majority_compared else None


@dataclass(frozen=True)
class StudyPay:
    median_seconds: float | None
    hourly_cents: int | None
    floor_cents: int

    @property
    def hourly(self) -> str:
        return "" if self.hourly_cents is None else "$" + dollars(self.hourly_cents)

    @property
    def floor(self) -> str:
        return "$" + dollars(self.floor_cents)

    @property
    def below_floor(self) -> bool:
        return self.hourly_cents is not None and self.hourly_cents < self.floor_cents


def dollars(cents: int) -> str:
    """Format cents as dollars with two decimals: 1234 -> "12.34"."""
    return f"{Decimal(cents) / 100:.2f}"


def hourly_cents(*, pay_per_judgment_cents: int, median_seconds: float | None) -> int | None:
    """Effective hourly pay: pay per judgment x judgments per hour at the median time.

    Prolific judges a study's pay on the median completion time, so the median is used here.
    """
    if not median_seconds or median_seconds <= 0:
        return None
    value = Decimal(pay_per_judgment_cents) * Decimal(3600) / Decimal(str(median_seconds))
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _majority_agreement(rows: Iterable[tuple[int, int, str]]) -> dict[int, tuple[int, int]]:
    """Per worker: (pairs compared, pairs where they chose what most of the others chose).

    A pair counts for a worker when at least two other workers judged it and the others have a
    strict majority preference (A, B or tie).
    """
    by_pair: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pair_id, worker_id, preference in rows:
        by_pair[pair_id].append((worker_id, preference))
    result: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for judged in by_pair.values():
        for worker_id, preference in judged:
            others = Counter(p for w, p in judged if w != worker_id)
            if sum(others.values()) < 2:
                continue
            (top, top_count), *rest = others.most_common()
            if rest and rest[0][1] == top_count:
                continue
            result[worker_id][0] += 1
            result[worker_id][1] += int(preference == top)
    return {worker_id: (c, a) for worker_id, (c, a) in result.items()}


def study_worker_quality(*, study: Study) -> list[WorkerQuality]:
    """One row per worker with a user (crowd workers) in the study, most judgments first."""
    # Each worker's skipped items counted in the same read (skips are never judgments).
    workers = list(
        Worker.objects.filter(study=study, user__isnull=False)
        .annotate(
            skipped=Count("assignments", filter=Q(assignments__status=Assignment.Status.SKIPPED))
        )
        .order_by("pk")
    )
    judgments = list(
        HumanJudgment.objects.filter(study=study, is_imported=False).values_list(
            "worker_id", "pair_id", "pair__is_gold", "pair__gold_side", "preference",
            "likert_shown", "duration_ms",
        )
    )  # fmt: skip
    majority = _majority_agreement(
        (pair_id, worker_id, preference)
        for worker_id, pair_id, is_gold, _, preference, _, _ in judgments
        if not is_gold and preference
    )
    per_worker: dict[int, list[tuple]] = defaultdict(list)
    for row in judgments:
        per_worker[row[0]].append(row)
    pay: dict[int, dict[str, int]] = defaultdict(lambda: {"pending": 0, "approved": 0})
    for worker_id, status, total in (
        PayEntry.objects.filter(study=study)
        .values_list("worker_id", "status")
        .annotate(total=Sum("amount_cents"))
    ):
        if status in ("pending", "approved"):
            pay[worker_id][status] += total or 0

    shared = _shared_address_ids(study=study)
    rows = []
    for worker in workers:
        mine = per_worker.get(worker.pk, [])
        gold = [r for r in mine if r[2] and r[4]]
        gold_correct = sum(1 for r in gold if r[4] == r[3])
        seconds = [r[6] / 1000 for r in mine if r[6] is not None]
        median = statistics.median(seconds) if seconds else None
        shown = [r[5] for r in mine if r[5] is not None]
        left_share = (
            sum(1 for s in shown if likert_collapse(s, ties=False) == "A") / len(shown)
            if shown
            else None
        )
        compared, agreed = majority.get(worker.pk, (0, 0))
        flags = []
        if worker.excluded:
            flags.append("excluded")
        if worker.state in (Worker.State.WARNED, Worker.State.BLOCKED):
            flags.append(worker.get_state_display().lower())
        fast = median is not None and median < FAST_SECONDS
        if fast:
            flags.append("fast")
        if shared.get(worker.pk, 0) >= SHARED_ADDRESS_IDS:
            flags.append(f"{shared[worker.pk]} ids from one address")
        if fast or shared.get(worker.pk, 0) >= SHARED_ADDRESS_IDS:
            flags.append("suspicious")
        if (
            left_share is not None
            and len(shown) >= LEFT_SHARE_MIN_ITEMS
            and not LEFT_SHARE_RANGE[0] <= left_share <= LEFT_SHARE_RANGE[1]
        ):
            flags.append("side bias")
        rows.append(
            WorkerQuality(
                worker=worker,
                judgments=len(mine),
                gold_checked=len(gold),
                gold_correct=gold_correct,
                majority_compared=compared,
                majority_agreed=agreed,
                median_seconds=median,
                left_share=left_share,
                hourly_cents=hourly_cents(
                    pay_per_judgment_cents=study.pay_per_judgment_cents, median_seconds=median
                ),
                pending_cents=pay[worker.pk]["pending"],
                approved_cents=pay[worker.pk]["approved"],
                flags=tuple(flags),
                skipped=worker.skipped,
            )
        )
    rows.sort(key=lambda row: -row.judgments)
    return rows


def _shared_address_ids(*, study: Study) -> dict[int, int]:
    """Per worker: the most participant ids that entered the study from one of their addresses."""
    ids_by_client: dict[str, set[str]] = defaultdict(set)
    clients_by_worker: dict[int, set[str]] = defaultdict(set)
    for worker_id, client, external_id in EntryLog.objects.filter(
        study=study, outcome=EntryLog.Outcome.ENTERED, worker__isnull=False
    ).values_list("worker_id", "client_key", "external_id"):
        ids_by_client[client].add(external_id)
        clients_by_worker[worker_id].add(client)
    return {
        worker_id: max(len(ids_by_client[client]) for client in clients)
        for worker_id, clients in clients_by_worker.items()
    }


def worker_entry_log(*, worker: Worker) -> list[EntryLog]:
    """Every entry attempt of a participant (by worker, or by their id if refused), newest first."""
    return list(
        EntryLog.objects.filter(
            Q(worker=worker) | Q(external_id=worker.external_id, panel=worker.panel),
            study_id=worker.study_id,
        ).order_by("-created_at", "-pk")[:500]
    )


def study_pay_summary(*, study: Study) -> StudyPay:
    """The study's effective hourly pay at the median time per judgment, against its floor."""
    durations = [
        duration
        for duration in HumanJudgment.objects.filter(
            study=study, is_imported=False, duration_ms__isnull=False
        ).values_list("duration_ms", flat=True)
        if duration is not None
    ]
    median = statistics.median(durations) / 1000 if durations else None
    return StudyPay(
        median_seconds=median,
        hourly_cents=hourly_cents(
            pay_per_judgment_cents=study.pay_per_judgment_cents, median_seconds=median
        ),
        floor_cents=study.hourly_floor_cents,
    )


def study_payout_rows(*, study: Study, prolific: bool) -> list[tuple[str, ...]]:
    """Rows of the payouts CSV.

    With `prolific`, Prolific's bulk bonus format: one line per Prolific participant with a bonus
    due, in dollars ("participant id, amount"). The bonus is only what Prolific's reward does not
    pay (`annotation.selectors.bonus`): the gold bonuses and any judgment pay above the reward,
    never the judgments the reward already pays. Otherwise the whole ledger, one line per entry.
    """
    if prolific:
        return [
            (line.external_id, dollars(line.arithmetic.due_cents))
            for line in study_bonus_lines(study=study)
            if line.arithmetic.due_cents > 0
        ]
    entries = PayEntry.objects.filter(study=study).select_related("worker").order_by("pk")
    return [
        (
            entry.worker.panel,
            entry.worker.external_id,
            entry.kind,
            str(entry.amount_cents),
            entry.status,
            entry.reason,
            entry.created_at.isoformat(),
        )
        for entry in entries
    ]
