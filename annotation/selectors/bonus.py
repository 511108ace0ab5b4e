"""What each Prolific participant is owed as a bonus, and the arithmetic that says why.

Prolific pays every approved submission the study's reward; Concord's ledger holds the pay for
each judgment and the gold bonuses. The reward already pays the judgments up to its amount, so
the bonus is only what the reward does not cover:

    above the reward = max(0, approved judgment pay - reward paid to this participant)
    bonus due        = max(0, gold bonuses + above the reward - bonus already sent)

The reward paid to a participant is the study's reward (`prolific_reward_cents`, or the session
pay when it is empty), except for a participant Concord knows Prolific pays no reward to: one
marked returned (Prolific pays a returned submission nothing, so their approved judgments are
paid as bonus). Only approved (or paid) ledger entries count: pending pay waits for review and
rejected pay is never owed. Everything is recomputed from the ledger rows on each read.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Sum

from annotation.models import PayEntry, ProlificBonusBatch, ProlificBonusLine, Study, Worker

OWED_STATUSES = (PayEntry.Status.APPROVED, PayEntry.Status.PAID)


@dataclass(frozen=True)
class BonusArithmetic:
    """One participant's bonus, term by term (all in US cents)."""

    judgments: int
    judgment_cents: int
    reward_cents: int
    gold_cents: int
    already_cents: int
    pending_cents: int
    reward_note: str = ""

    @property
    def above_reward_cents(self) -> int:
        """Approved judgment pay that the reward does not cover."""
        return max(0, self.judgment_cents - self.reward_cents)

    @property
    def due_cents(self) -> int:
        """The bonus still to pay: gold plus pay above the reward, less what was already sent."""
        return max(0, self.gold_cents + self.above_reward_cents - self.already_cents)


@dataclass(frozen=True)
class BonusLine:
    """A Prolific participant (worker id, PROLIFIC_PID) and their bonus arithmetic."""

    worker_id: int
    external_id: str
    arithmetic: BonusArithmetic


def study_reward_cents(*, study: Study) -> int:
    """The reward Prolific pays per approved submission, as the study records it.

    Empty means the session pay: target per worker x pay per judgment (what the launch
    checklist tells the researcher to set on Prolific).
    """
    if study.prolific_reward_cents is not None:
        return study.prolific_reward_cents
    return study.target_per_worker * study.pay_per_judgment_cents


def study_bonus_lines(*, study: Study) -> list[BonusLine]:
    """One line per Prolific participant with any ledger entry, by participant id.

    One grouped read of the ledger and one of the bonus batches sent through Prolific's API
    (a line counts as already sent unless its batch failed: paid, possibly paid and on its way
    alike), whatever the study's size.
    """
    reward = study_reward_cents(study=study)
    sums: dict[tuple[int, str, str], dict[str, int]] = defaultdict(
        lambda: {"judgments": 0, "judgment": 0, "gold": 0, "pending": 0}
    )
    rows = (
        PayEntry.objects.filter(study=study, worker__panel=Worker.Panel.PROLIFIC)
        .values_list("worker_id", "worker__external_id", "worker__state", "kind", "status")
        .annotate(total=Sum("amount_cents"), count=Count("pk"))
        .order_by()
    )
    for worker_id, external_id, state, kind, status, total, count in rows:
        line = sums[(worker_id, external_id, state)]
        if status == PayEntry.Status.PENDING:
            line["pending"] += total or 0
        elif status in OWED_STATUSES and kind == PayEntry.Kind.JUDGMENT:
            line["judgment"] += total or 0
            line["judgments"] += count
        elif status in OWED_STATUSES and kind == PayEntry.Kind.BONUS:
            line["gold"] += total or 0
    sent = dict(
        ProlificBonusLine.objects.filter(batch__study=study)
        .exclude(batch__status=ProlificBonusBatch.Status.FAILED)
        .values_list("worker_id")
        .annotate(total=Sum("amount_cents"))
        .order_by()
    )
    lines = []
    for (worker_id, external_id, state), line in sorted(sums.items(), key=lambda kv: kv[0][1]):
        returned = state == Worker.State.RETURNED
        lines.append(
            BonusLine(
                worker_id=worker_id,
                external_id=external_id,
                arithmetic=BonusArithmetic(
                    judgments=line["judgments"],
                    judgment_cents=line["judgment"],
                    reward_cents=0 if returned else reward,
                    gold_cents=line["gold"],
                    already_cents=sent.get(worker_id, 0),
                    pending_cents=line["pending"],
                    reward_note="returned: Prolific pays no reward" if returned else "",
                ),
            )
        )
    return lines
