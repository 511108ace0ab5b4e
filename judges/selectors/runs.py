"""Reads of judge runs and calls, each checked against the requesting user."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Max, Q, QuerySet, Sum
from django.utils import timezone

from annotation.selectors.studies import study_list_for_user
from judges.kinds import judge_kind
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun
from judges.services.calls import call_messages, cost_compute, tokens_estimate


@dataclass(frozen=True)
class RunProgress:
    """A run's progress, counted from its call rows (never from counters)."""

    status: str
    total: int
    pending: int
    running: int
    done: int
    failed: int
    parse_errors: int
    refusals: int
    cost_usd: Decimal
    estimated_to_finish_usd: Decimal
    budget_usd: Decimal | None
    # Requests whose reply was never recorded (each may have been paid a second time), and
    # their estimated price: the budget counts it.
    possibly_charged_twice: int = 0
    possibly_charged_twice_usd: Decimal = Decimal(0)
    # Why the calls cannot make progress now, as a sentence with its time ("" when they can).
    stall: str = ""
    # A PL run's scoring: who holds it and how lately it beat, a lost worker's re-queue, or
    # why it failed ("" for other judges and for a PL run done or cancelled).
    scoring: str = ""

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def percent(self) -> int:
        return int(100 * self.finished / self.total) if self.total else 100

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in (
            "cost_usd",
            "estimated_to_finish_usd",
            "budget_usd",
            "possibly_charged_twice_usd",
        ):
            data[key] = None if data[key] is None else str(data[key])
        data["percent"] = self.percent
        return data


def judge_run_list_for_user(*, user: User | AnonymousUser) -> QuerySet[JudgeRun]:
    """Runs on studies the user may read (none for annotators and outsiders)."""
    return JudgeRun.objects.filter(study__in=study_list_for_user(user=user)).select_related(
        "judge", "study"
    )


def judge_run_get_for_user(*, user: User | AnonymousUser, run_id: int) -> JudgeRun:
    """The run if the user may read it; raise JudgeRun.DoesNotExist otherwise."""
    return judge_run_list_for_user(user=user).get(pk=run_id)


def judge_call_list(*, run: JudgeRun, status: str = "") -> QuerySet[JudgeCall]:
    """The run's calls by pair and order, with the prompt and both systems (researchers only),
    optionally of one status; a grading run's grade calls (no pair) come last, with their
    answer's prompt and system."""
    calls = run.calls.select_related(
        "pair__prompt",
        "pair__answer_a__system",
        "pair__answer_b__system",
        "answer__prompt",
        "answer__system",
    ).order_by("pair_id", "answer_id", "turn", "order", "pk")
    return calls.filter(status=status) if status else calls


def judge_call_get(*, run: JudgeRun, call_id: int) -> JudgeCall:
    return run.calls.select_related(
        "pair__prompt", "pair__answer_a", "pair__answer_b", "answer__prompt", "answer__system"
    ).get(pk=call_id)


def panel_member_calls(*, call: JudgeCall) -> list[tuple[str, list[JudgeCall]]]:
    """A panel call's members with the calls of theirs it combined (judges.services.panels),
    in the request's order; [] for any other call. The calls are read from the panel run's
    member runs only, so a request can point at nothing else."""
    used = (call.request or {}).get("member_calls")
    if not isinstance(used, dict):
        return []
    ids = {int(pk) for pks in used.values() for pk in pks}
    found = {
        c.pk: c
        for c in JudgeCall.objects.filter(
            pk__in=ids, run__in=call.run.panel_sources.all()
        ).select_related("run")
    }
    return [
        (str(name), [found[int(pk)] for pk in pks if int(pk) in found])
        for name, pks in used.items()
    ]


def judge_run_progress(*, run: JudgeRun) -> RunProgress:
    """Count the run's calls by status and estimate what finishing would cost, in two queries."""
    counts = run.calls.aggregate(
        total=Count("pk"),
        pending=Count("pk", filter=Q(status=JudgeCall.Status.PENDING)),
        running=Count("pk", filter=Q(status=JudgeCall.Status.RUNNING)),
        done=Count("pk", filter=Q(status=JudgeCall.Status.DONE)),
        failed=Count("pk", filter=Q(status=JudgeCall.Status.FAILED)),
        parse_errors=Count("pk", filter=Q(status=JudgeCall.Status.DONE) & ~Q(parse_error="")),
        refusals=Count("pk", filter=Q(refusal=True)),
        cost=Sum("cost_usd"),
        paid=Count("pk", filter=Q(cost_usd__gt=0)),
        unrecorded=Sum("unrecorded_requests"),
        last_finished=Max("finished_at"),
    )
    cost = counts["cost"] or Decimal(0)
    remaining = counts["pending"] + counts["running"]
    estimate = Decimal(0)
    if remaining and counts["paid"]:
        estimate = cost / counts["paid"] * remaining
    elif remaining and judge_kind(run.judge.kind).paid:
        estimate = _first_call_estimate(run) * remaining
    return RunProgress(
        status=run.status,
        total=counts["total"],
        pending=counts["pending"],
        running=counts["running"],
        done=counts["done"],
        failed=counts["failed"],
        parse_errors=counts["parse_errors"],
        refusals=counts["refusals"],
        cost_usd=cost.quantize(Decimal("0.000001")),
        estimated_to_finish_usd=estimate.quantize(Decimal("0.000001")),
        budget_usd=run.budget_usd,
        possibly_charged_twice=counts["unrecorded"] or 0,
        possibly_charged_twice_usd=run.exposure_usd.quantize(Decimal("0.000001")),
        stall=_stall_text(run, counts["last_finished"], remaining),
        scoring=pl_run_scoring_state(run=run) if run.judge.kind == Judge.Kind.PL else "",
    )


def _utc(moment: datetime) -> str:
    return timezone.localtime(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pl_run_scoring_state(*, run: JudgeRun) -> str:
    """What a PL run's scoring is doing, as a sentence for its page (judges.reward.scoring).

    Pending with a live lease: scoring, with the heartbeat's age; with a lease that ran out: the
    worker is lost and the reconciler will queue it again; re-queued: when; re-sent (its message
    was lost, no worker claimed it): when, how long ago and how often; queued: how long ago;
    failed: why.
    """
    from judges.reward.resend import queued_text, resent_text
    from judges.reward.scoring import FAILED_NOTE, RUN_MESSAGE

    if run.status == JudgeRun.Status.FAILED:
        return f"Failed: {run.note.removeprefix(FAILED_NOTE)}"
    if run.status != JudgeRun.Status.PENDING:
        return ""
    now = timezone.now()
    most = settings.CONCORD_REWARD_SCORE_MAX_ATTEMPTS
    attempt = f"attempt {run.score_attempts} of {most}"
    if run.score_lease_token and run.score_lease_expires_at is not None:
        scored = AnswerScore.objects.filter(run=run).count()
        beat = run.score_heartbeat_at or run.started_at or now
        ago = max(0, int((now - beat).total_seconds()))
        if run.score_lease_expires_at >= now:
            return (
                f"Scoring, last heartbeat {ago} s ago ({scored} answers scored so far; {attempt})"
            )
        return (
            f"Worker lost? No heartbeat for {ago} s: its lease ran out at "
            f"{_utc(run.score_lease_expires_at)}, and the reconciler will queue the scoring "
            f"again ({scored} answers scored so far are kept; {attempt})"
        )
    waiting = (
        "waiting for a worker on the reward_model queue (celery -A config worker -Q reward_model)"
    )
    resent = run.score_resent_at
    if resent is not None and (run.score_requeued_at is None or resent >= run.score_requeued_at):
        lost = resent_text(RUN_MESSAGE, resent_at=resent, resends=run.score_resends, job="scoring")
        return f"{lost}; {run.score_attempts} of {most} attempts used); {waiting}"
    if run.score_requeued_at is not None:
        scored = AnswerScore.objects.filter(run=run).count()
        return (
            f"Worker lost, re-queued at {_utc(run.score_requeued_at)} ({scored} answers scored "
            f"so far are kept; {run.score_attempts} of {most} attempts used); {waiting}"
        )
    ago, late = queued_text(RUN_MESSAGE, queued_at=run.score_queued_at or run.created_at)
    return f"Queued {ago} s ago, {waiting}{late}"


def _stall_text(run: JudgeRun, last_finished: datetime | None, remaining: int) -> str:
    """Why a running run does not progress: what a worker or the page noted, or a long silence."""
    if run.status != JudgeRun.Status.RUNNING or not remaining:
        return ""
    if run.stall_reason and run.stall_since is not None:
        what, _, detail = run.stall_reason.partition(": ")
        since = timezone.localtime(run.stall_since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{what[:1].upper()}{what[1:]} since {since}" + (f": {detail}" if detail else "")
    last = last_finished or run.started_at
    quiet = settings.CONCORD_JUDGE_STALL_SECONDS
    if last is not None and (timezone.now() - last).total_seconds() > quiet:
        since = timezone.localtime(last, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (
            f"No call finished since {since}: is a worker taking the llm_judge queue "
            "(celery -A config worker -Q llm_judge)?"
        )
    return ""


def _first_call_estimate(run: JudgeRun) -> Decimal:
    """Before any call is paid: the price of one call from its prompt length and reply cap."""
    call = (
        run.calls.select_related(
            "run__judge",
            "run__study",
            "pair__prompt",
            "pair__answer_a",
            "pair__answer_b",
            "answer__prompt",
        )
        .order_by("pk")
        .first()
    )
    if call is None:
        return Decimal(0)
    judge = run.judge
    messages = call_messages(call=call)
    max_tokens = int(judge.params.get("max_tokens", 512))
    prompt_tokens = tokens_estimate(judge=judge, messages=messages) - max_tokens
    return cost_compute(judge=judge, tokens_in=prompt_tokens, tokens_out=max_tokens)
