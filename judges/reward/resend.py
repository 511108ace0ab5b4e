"""Sending again the message of a PL job (a run's scoring, a training) that no worker claimed.

A job's row is the durable state and its message only carries the id; a message the broker
lost (a Redis restart, a purged queue) would leave the job pending forever, since nothing else
would ever claim it. Each kind of job keeps when its message was last sent, and its reconciler
sends another to a job no worker claimed for a grace period after that, but only while no
message waits in the reward_model queue (behind a long training its own message is still in
line, and the worker takes it in turn). The re-send is taken by one conditional UPDATE
(unclaimed, last sent before the grace period) before the message goes out, so two reconcilers
send one message and a job a worker claimed in the meantime is not sent again; a broker that
refuses puts the times back for the next round. A late first copy finds the job claimed, or
done, and does nothing. Each re-send is counted on the row and shown on the job's page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import F, Model
from django.db.models.expressions import Func
from django.db.models.query import QuerySet
from django.utils import timezone

from core.broker import BrokerUnavailable, queue_length, task_send
from core.queues import Queue

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LostMessage:
    """Where a kind of PL job keeps its sends, and which of its rows no worker holds."""

    what: str  # "PL run", for the log
    task: str
    grace_setting: str  # the setting's name: seconds after a send before the message is lost
    unclaimed: Callable[[], QuerySet]  # pending rows that no worker holds
    last_sent: Callable[[], Func]  # when a row's message was last sent
    queued_field: str  # when its message was last sent
    resent_field: str  # when the reconciler last sent it again
    count_field: str  # how many times the reconciler sent it again

    def grace(self) -> timedelta:
        return timedelta(seconds=float(getattr(settings, self.grace_setting)))


def resend_take(kind: LostMessage, *, pk: int, before: datetime, now: datetime) -> bool:
    """Take the re-send of an unclaimed job last sent before `before`; True when this call took
    it (the caller then sends the message).

    One conditional UPDATE on the job's own columns: it must be unclaimed and last sent before
    `before`; it writes the new send time and counts the re-send. A job a worker claimed
    meanwhile, or whose re-send another reconciler took, is left alone.
    """
    changed = (
        kind.unclaimed()
        .alias(last_sent=kind.last_sent())
        .filter(pk=pk, last_sent__lt=before)
        .update(
            **{
                kind.queued_field: now,
                kind.resent_field: now,
                kind.count_field: F(kind.count_field) + 1,
            }
        )
    )
    return bool(changed == 1)


def resend_unclaimed(kind: LostMessage, now: datetime) -> int:
    """Send again the message of each job of `kind` no worker claimed within the grace period;
    return how many were sent."""
    grace = kind.grace()
    before = now - grace
    stale = list(
        kind.unclaimed()
        .alias(last_sent=kind.last_sent())
        .filter(last_sent__lt=before)
        .order_by("pk")
        .values_list("pk", kind.queued_field, kind.resent_field)
    )
    if not stale:
        return 0
    waiting = queue_length(Queue.REWARD_MODEL)
    if waiting:
        logger.info(
            "%s reconciler: %d messages still wait in the reward_model queue; %d unclaimed not "
            "sent again",
            kind.what,
            waiting,
            len(stale),
        )
        return 0
    sent = 0
    model: type[Model] = kind.unclaimed().model
    for pk, queued_at, resent_at in stale:
        if not resend_take(kind, pk=pk, before=before, now=now):
            continue
        try:
            task_send(kind.task, args=[pk], queue=Queue.REWARD_MODEL)
        except BrokerUnavailable:
            # Nothing went out: put the times back, so the next round tries again at once.
            model._default_manager.filter(pk=pk, **{kind.resent_field: now}).update(
                **{
                    kind.queued_field: queued_at,
                    kind.resent_field: resent_at,
                    kind.count_field: F(kind.count_field) - 1,
                }
            )
            logger.warning("%s %s: not sent again, the broker refused", kind.what, pk)
            continue
        sent += 1
    if sent:
        logger.warning(
            "%s reconciler: %d no worker claimed within %g s sent again",
            kind.what,
            sent,
            grace.total_seconds(),
        )
    return sent


def _utc(moment: datetime) -> str:
    return timezone.localtime(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def resent_text(kind: LostMessage, *, resent_at: datetime, resends: int, job: str) -> str:
    """The page's sentence for a job whose message the reconciler sent again ("Message lost?
    Re-sent at ... UTC (N s ago): no worker had claimed the `job` 600 s after it was queued (re-sent
    once")."""
    ago = max(0, int((timezone.now() - resent_at).total_seconds()))
    times = "once" if resends == 1 else f"{resends} times"
    return (
        f"Message lost? Re-sent at {_utc(resent_at)} ({ago} s ago): no worker had claimed the "
        f"{job} {kind.grace().total_seconds():g} s after it was queued (re-sent {times}"
    )


def queued_text(kind: LostMessage, *, queued_at: datetime | None) -> tuple[int, str]:
    """How long ago a job was queued, and what follows when that is past the grace period (the
    reconciler will send it again)."""
    ago = max(0, int((timezone.now() - queued_at).total_seconds())) if queued_at else 0
    grace = kind.grace().total_seconds()
    late = (
        f"; no worker has claimed it for longer than {grace:g} s ({kind.grace_setting}), so the "
        "reconciler sends it again once no other message waits in that queue"
        if ago > grace
        else ""
    )
    return ago, late
