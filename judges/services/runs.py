"""Starting, fanning out, cancelling, resuming and reconciling judge runs."""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from annotation.access import is_researcher_or_admin
from annotation.models import Pair, Study
from annotation.selectors.studies import study_list_for_user
from core.broker import BrokerUnavailable, broker_check, queue_length, task_send
from core.errors import ApplicationError
from core.queues import Queue
from judges.kinds import RunPlan, judge_kind
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.calls import (
    attempt_errors_appended,
    call_cost_estimate,
    run_cost,
    run_finish_if_complete,
    run_stall_clear,
    run_stall_note,
)
from judges.services.grading import grade_calls_create, is_grading, references_missing
from judges.services.judges import judge_readiness
from judges.services.limits import study_run_place_take
from judges.services.panels import panel_runs_stale
from judges.services.turns import pair_call_turns

logger = logging.getLogger(__name__)

TASK_CALL_EXECUTE = "judges.call_execute"
TASK_CALLS_EXECUTE = "judges.calls_execute"
TASK_RUN_FAN_OUT = "judges.run_fan_out"
TASK_PANEL_COMBINE = "judges.panel_run_combine"
# The PostgreSQL advisory lock held by the one reconciler running ("conc" in ASCII).
RECONCILE_LOCK = 0x636F6E63


BROKER_STALL = "broker unreachable"
# A judge task the broker refused is not lost: its call stays pending and the reconciler sends
# it again, which the refusal's message tells the researcher.
REQUEUED_BY_RECONCILER = "the reconciler will queue the work again once the broker answers."
# The last broker check of this process: (time.monotonic(), error or "") - a page polled every
# few seconds by many researchers asks the broker at most once per interval.
_broker_seen: dict[str, tuple[float, str]] = {}
BROKER_CHECK_INTERVAL = 5.0


# Broker priorities of the judge queue (core.broker.task_send: lower is taken first). Every judge
# message waits on the backlog step but the calls the reconciler takes back from a dead worker:
# those were requested once already, and sent again at the tail of the queue they waited behind
# the whole backlog (79-150 s after their first request despite a 12 s lease, issue 27).
PRIORITY_BACKLOG = 6
PRIORITY_TAKEN_BACK = 0


def _judge_task_send(
    name: str, *, args: list[int] | list[list[int]], priority: int = PRIORITY_BACKLOG
) -> None:
    """Send a judge task to the LLM judge queue (see REQUEUED_BY_RECONCILER)."""
    task_send(
        name,
        args=args,
        queue=Queue.LLM_JUDGE,
        recovery=REQUEUED_BY_RECONCILER,
        priority=priority,
    )


class JudgeNotReady(ApplicationError):
    """The judge cannot run now; the message says what to set."""

    http_status = 409


def _check_may_run(*, user: User, study: Study) -> None:
    """Only a researcher or admin (the pages' rule) who may read the study starts or cancels."""
    may = is_researcher_or_admin(user)
    if not may or not study_list_for_user(user=user).filter(pk=study.pk).exists():
        raise PermissionDenied(f"{user} may not run judges on study {study.slug!r}")


def orders_for(*, policy: str, seed: int, pair_id: int) -> list[str]:
    """The orders a pair is shown in under a judge's order policy."""
    if policy == Judge.OrderPolicy.BOTH:
        return [JudgeCall.Order.A_FIRST, JudgeCall.Order.B_FIRST]
    if policy == Judge.OrderPolicy.RANDOM:
        rng = random.Random(f"{seed}:{pair_id}:order")
        return [rng.choice([JudgeCall.Order.A_FIRST, JudgeCall.Order.B_FIRST])]
    return [JudgeCall.Order.A_FIRST]


def judge_run_start(
    *,
    judge: Judge,
    study: Study,
    user: User,
    pairs: Iterable[Pair] | None = None,
    budget_usd: Decimal | None = None,
    seed: int | None = None,
) -> JudgeRun:
    """Check that `user` may run `judge` on `study` now, then start its run (judge_run_create).

    Raise PermissionDenied for a user who may not, JudgeNotReady when the judge lacks its key
    or configuration, ValidationError for a budget that is negative or could never bind
    (_budget_check), and what judge_run_create raises.
    """
    _check_may_run(user=user, study=study)
    problem = judge_readiness(judge=judge)
    if problem:
        raise JudgeNotReady(f"judge {judge.name!r} is {problem}")
    _budget_check(judge=judge, budget_usd=budget_usd)
    return judge_run_create(
        judge=judge, study=study, user=user, pairs=pairs, budget_usd=budget_usd, seed=seed
    )


def judge_run_create(
    *,
    judge: Judge,
    study: Study,
    user: User | None,
    pairs: Iterable[Pair] | None = None,
    budget_usd: Decimal | None = None,
    seed: int | None = None,
) -> JudgeRun:
    """Write a run of any kind of judge and queue its first task after commit.

    The judge's kind plans the run (judges.kinds: its pairs, checked, and what is written with
    it); then, in one transaction, the judge's row is locked when the plan asks it, the study's
    row is locked and its active runs counted (judges.services.limits), the run and its pairs
    are written with the kind's own rows, and the kind's task is queued once it commits. The
    caller checked the user's permission and the judge's readiness.

    Raise ValidationError for pairs of another study, none, or what the kind refuses (a prompt
    without the reference it needs, a panel member without a done run), BrokerUnavailable when
    the broker does not answer (before anything is written), RunLimitReached (a ValidationError)
    when the study has CONCORD_STUDY_MAX_ACTIVE_RUNS runs queued or running.
    """
    planner = judge_kind(judge.kind).plan
    if planner is None:
        raise JudgeNotReady(f"judge {judge.name!r} is {judge_readiness(judge=judge)}")
    plan = planner(judge=judge, study=study, pairs=pairs, seed=seed, budget_usd=budget_usd)
    broker_check()
    with transaction.atomic():
        if plan.lock_judge:
            Judge.objects.select_for_update().filter(pk=judge.pk).first()
        study_run_place_take(study=study)
        run = JudgeRun.objects.create(
            judge=judge,
            study=study,
            status=plan.status,
            budget_usd=plan.budget_usd,
            seed=plan.seed,
            turns=plan.turns,
            created_by=user,
            started_at=plan.started_at,
            note=plan.note,
            **plan.columns,
        )
        run.pairs.set(plan.pairs)
        if plan.fill is not None:
            plan.fill(run)
        run_id = run.pk
        transaction.on_commit(lambda: plan.send(run_id))
    return run


def run_pairs_checked(*, study: Study, pairs: Iterable[Pair] | None) -> list[Pair]:
    """The pairs a run judges, in id order: the study's, or the given ones, which must be its.

    Raise ValidationError naming pairs of another study, or when there are none.
    """
    if pairs is None:
        pair_list = list(study.pairs.order_by("pk"))
    else:
        pair_list = sorted(pairs, key=lambda pair: pair.pk)
        foreign = [pair.pk for pair in pair_list if pair.study_id != study.pk]
        if foreign:
            raise ValidationError({"pairs": f"pairs {foreign} do not belong to {study.slug!r}"})
    if not pair_list:
        raise ValidationError({"pairs": f"study {study.slug!r} has no pairs to judge"})
    return pair_list


def calls_run_plan(
    *,
    judge: Judge,
    study: Study,
    pairs: Iterable[Pair] | None,
    seed: int | None,
    budget_usd: Decimal | None,
) -> RunPlan:
    """Plan a run of calls (an LLM judge or a baseline): one pending call per pair, order and
    judged turn (the pair's own, or every turn of its prompt for a judge that judges each turn,
    judges.services.turns), fanned out by a task after commit.

    A single-answer grading judge gets one call per answer and turn instead, its pair verdicts
    derived when the last is recorded (judges.services.grading). Every prompt the judge would
    show with a reference answer (the study's reference categories) must have one, or
    ValidationError names them.
    """
    pair_list = run_pairs_checked(study=study, pairs=pairs)
    missing = references_missing(judge=judge, study=study, pairs=pair_list)
    if missing:
        shown = ", ".join(missing[:10]) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        raise ValidationError(
            {
                "pairs": f"{len(missing)} prompts of the reference categories "
                f"{', '.join(study.reference_categories)} have no reference answer ({shown}): "
                "import them (the reference field) or have a reference judge write them"
            }
        )
    run_seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    now = timezone.now()
    due = now + timedelta(seconds=settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS)

    def fill(run: JudgeRun) -> None:
        if is_grading(judge):
            # One call per answer and turn; grades made before are copied, and a run whose
            # grades are all copied is done (its pair verdicts derived) at once.
            if not grade_calls_create(run=run, pairs=pair_list, due=due):
                run_finish_if_complete(run_id=run.pk)
                run.refresh_from_db()
            return
        call_turns = pair_call_turns(turns=judge.turns, pairs=pair_list)
        JudgeCall.objects.bulk_create(
            JudgeCall(run=run, pair=pair, order=order, turn=turn, lease_expires_at=due)
            for pair in pair_list
            for turn in call_turns[pair.pk]
            for order in orders_for(policy=judge.order_policy, seed=run_seed, pair_id=pair.pk)
        )

    return RunPlan(
        pairs=pair_list,
        status=JudgeRun.Status.RUNNING,
        seed=run_seed,
        send=lambda run_id: _judge_task_send(TASK_RUN_FAN_OUT, args=[run_id, 0]),
        budget_usd=budget_usd,
        turns=judge.turns,
        started_at=now,
        # The judge's row, locked as a template edit locks it (judges.services.templates): an
        # edit either sees this run and is refused, or lands before any of its calls is made.
        lock_judge=True,
        fill=fill,
    )


def judge_run_fan_out(*, run_id: int, after_call_id: int) -> int | None:
    """Queue one chunk of the run's pending calls with ids above `after_call_id`.

    Return the last id queued when more may follow, None when the run is fully queued. Big runs
    are queued chunk by chunk, each chunk by its own task, so no message or request is huge.
    """
    if not JudgeRun.objects.filter(pk=run_id, status=JudgeRun.Status.RUNNING).exists():
        return None
    chunk = settings.CONCORD_JUDGE_FAN_OUT_CHUNK
    ids = list(
        JudgeCall.objects.filter(
            run_id=run_id, status=JudgeCall.Status.PENDING, pk__gt=after_call_id
        )
        .order_by("pk")
        .values_list("pk", flat=True)[:chunk]
    )
    batch = max(1, settings.CONCORD_JUDGE_CALL_BATCH)
    for start in range(0, len(ids), batch):
        _judge_task_send(TASK_CALLS_EXECUTE, args=[ids[start : start + batch]])
    return ids[-1] if len(ids) == chunk else None


def judge_call_retry_send(*, call_id: int, countdown: float) -> None:
    """Send one call of a batch again in `countdown` seconds (its retry time, a rate-limit wait).

    A broker that refuses it is logged: the call is pending with its due time set, and the
    reconciler sends it once that and its grace period have passed.
    """
    try:
        task_send(
            TASK_CALL_EXECUTE,
            args=[call_id],
            queue=Queue.LLM_JUDGE,
            countdown=countdown,
            recovery=REQUEUED_BY_RECONCILER,
            priority=PRIORITY_BACKLOG,
        )
    except BrokerUnavailable:
        logger.warning("call %s: its retry was not queued", call_id, exc_info=True)


def judge_run_cancel(*, run: JudgeRun, user: User) -> JudgeRun:
    """Stop a run: no new call is claimed; calls already in flight finish and are recorded."""
    _check_may_run(user=user, study=run.study)
    changed = JudgeRun.objects.filter(
        pk=run.pk,
        status__in=[
            JudgeRun.Status.PENDING,
            JudgeRun.Status.RUNNING,
            JudgeRun.Status.BUDGET_REACHED,
        ],
    ).update(status=JudgeRun.Status.CANCELLED, finished_at=timezone.now())
    run.refresh_from_db()
    if changed != 1:
        raise ValidationError(f"run {run.pk} is {run.get_status_display().lower()}; not cancelled")
    return run


def _budget_check(*, judge: Judge, budget_usd: Decimal | None) -> None:
    """Refuse a budget that is negative, or that could never stop the run: one for a judge
    whose requests are not paid (judges.kinds) or that has no price per token (its calls cost 0
    on the ledger, so the spend never reaches any budget)."""
    if budget_usd is None:
        return
    if budget_usd < 0:
        raise ValidationError({"budget_usd": "The budget must be zero or more."})
    if not judge_kind(judge.kind).paid:
        raise ValidationError(
            {
                "budget_usd": f"Judge {judge.name!r} makes no paid request, so a budget would "
                "never stop its run: start it without one."
            }
        )
    if not judge.price_input_per_mtok and not judge.price_output_per_mtok:
        raise ValidationError(
            {
                "budget_usd": f"Judge {judge.name!r} has no price per token, so its calls cost "
                "nothing on the ledger and a budget would never stop its run: set its prices "
                "first, or start it without a budget."
            }
        )


def judge_run_resume(*, run: JudgeRun, user: User, budget_usd: Decimal | None = None) -> JudgeRun:
    """Go on with a cancelled or budget-stopped run as its kind does (judges.kinds), optionally
    with a new budget."""
    _check_may_run(user=user, study=run.study)
    problem = judge_readiness(judge=run.judge)
    if problem:
        raise JudgeNotReady(f"judge {run.judge.name!r} is {problem}")
    resume = judge_kind(run.judge.kind).resume
    if resume is None:
        raise JudgeNotReady(f"judge {run.judge.name!r} is not runnable")
    _budget_check(judge=run.judge, budget_usd=budget_usd)
    return resume(run=run, budget_usd=budget_usd)


def calls_run_resume(*, run: JudgeRun, budget_usd: Decimal | None = None) -> JudgeRun:
    """Run again a cancelled or budget-stopped run's pending calls (the caller checked the
    user's permission and the judge's readiness)."""
    new_budget = budget_usd if budget_usd is not None else run.budget_usd
    if new_budget is not None and run_cost(run_id=run.pk) >= new_budget:
        raise ValidationError(
            {"budget_usd": f"the run has spent {run_cost(run_id=run.pk)} USD; raise the budget"}
        )
    broker_check()
    with transaction.atomic():
        study_run_place_take(study=run.study, exclude_run_id=run.pk)
        changed = JudgeRun.objects.filter(
            pk=run.pk,
            status__in=[JudgeRun.Status.CANCELLED, JudgeRun.Status.BUDGET_REACHED],
        ).update(status=JudgeRun.Status.RUNNING, budget_usd=new_budget, finished_at=None)
        if changed != 1:
            run.refresh_from_db()
            raise ValidationError(
                f"run {run.pk} is {run.get_status_display().lower()}; only a cancelled or "
                "budget-stopped run can be resumed"
            )
        run_id = run.pk
        transaction.on_commit(lambda: _judge_task_send(TASK_RUN_FAN_OUT, args=[run_id, 0]))
    run.refresh_from_db()
    return run


def judge_calls_reconcile() -> int:
    """Queue again the calls a lost message or a dead worker left behind; return how many.

    One at a time: the reconciler holds a PostgreSQL advisory lock (released with its connection
    if its worker dies), and a second one that finds it taken returns 0 at once.

    A running call past its lease goes back to pending (its worker died, or lost its database
    for longer than the lease): its request may have been paid, so it is counted on the call
    (`unrecorded_requests`) and its estimated price on the run (`exposure_usd`, which the
    budget counts). A pending call is sent again only when it is really stale: its retry time
    and its grace period have passed, and no message waits in the judge queue any more (while a
    backlog drains, its own message is still in line). Runs with nothing open are marked done.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [RECONCILE_LOCK])
        (locked,) = cursor.fetchone()
    if not locked:
        logger.info("another reconciler is running; this one does nothing")
        return 0
    try:
        return _reconcile()
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [RECONCILE_LOCK])
        except DatabaseError:
            # A lost connection has released the lock already.
            logger.warning("could not release the reconciler's lock", exc_info=True)


def _leases_expired(now: datetime) -> list[int]:
    """Take back running calls past their lease, counting their requests as possibly paid."""
    limit = settings.CONCORD_JUDGE_FAN_OUT_CHUNK * 4
    with transaction.atomic():
        expired = list(
            JudgeCall.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status=JudgeCall.Status.RUNNING, lease_expires_at__lt=now)
            .select_related("run__judge")
            .order_by("pk")[:limit]
        )
        if not expired:
            return []
        exposure: dict[int, Decimal] = defaultdict(Decimal)
        paid_ids, free_ids = [], []
        for call in expired:
            if judge_kind(call.run.judge.kind).paid:
                paid_ids.append(call.pk)
                exposure[call.run_id] += call_cost_estimate(
                    judge=call.run.judge, request=call.request
                )
            else:
                free_ids.append(call.pk)
        message = (
            f"the lease ran out at {now:%Y-%m-%d %H:%M:%S} UTC with no reply recorded (its "
            "worker died or lost its database); sent again"
        )
        # Their messages died with the worker (Redis hands them out again only after the
        # visibility timeout), so they are sent again at once, whatever waits in the queue.
        reset = {
            "status": JudgeCall.Status.PENDING,
            "lease_expires_at": now
            + timedelta(seconds=settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS),
            "lease_token": "",
            "error": message,
        }
        if paid_ids:
            paid_message = message + "; its request may have been paid twice"
            JudgeCall.objects.filter(pk__in=paid_ids).update(
                **(reset | {"error": paid_message}),
                attempt_errors=attempt_errors_appended(message=paid_message),
                unrecorded_requests=F("unrecorded_requests") + 1,
            )
        if free_ids:
            JudgeCall.objects.filter(pk__in=free_ids).update(
                **reset, attempt_errors=attempt_errors_appended(message=message)
            )
        for run_id, amount in exposure.items():
            JudgeRun.objects.filter(pk=run_id).update(exposure_usd=F("exposure_usd") + amount)
    logger.warning("reconciler took back %d calls whose lease ran out", len(expired))
    return [call.pk for call in expired]


def _reconcile() -> int:
    now = timezone.now()
    grace = timedelta(seconds=settings.CONCORD_JUDGE_PENDING_GRACE_SECONDS)
    taken_back = _leases_expired(now)
    waiting = queue_length(Queue.LLM_JUDGE)
    if waiting:
        logger.info(
            "reconciler: %d messages still wait in the judge queue; none sent again", waiting
        )
        stale: list[int] = []
    else:
        with transaction.atomic():
            stale = list(
                JudgeCall.objects.select_for_update(skip_locked=True)
                .filter(
                    Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True),
                    Q(not_before__isnull=True) | Q(not_before__lte=now),
                    Exists(
                        JudgeRun.objects.filter(
                            pk=OuterRef("run_id"), status=JudgeRun.Status.RUNNING
                        )
                    ),
                    status=JudgeCall.Status.PENDING,
                )
                .order_by("pk")
                .values_list("pk", flat=True)[: settings.CONCORD_JUDGE_FAN_OUT_CHUNK * 4]
            )
            JudgeCall.objects.filter(pk__in=stale).update(lease_expires_at=now + grace)
    for call_id in taken_back:
        _judge_task_send(TASK_CALL_EXECUTE, args=[call_id], priority=PRIORITY_TAKEN_BACK)
    for call_id in stale:
        _judge_task_send(TASK_CALL_EXECUTE, args=[call_id])
    if stale:
        logger.info("reconciler queued %d stale calls again", len(stale))
    for run_id in JudgeRun.objects.filter(status=JudgeRun.Status.RUNNING).values_list(
        "pk", flat=True
    ):
        run_finish_if_complete(run_id=run_id)
    # A panel run still running after the grace period lost its combination's message.
    panels = panel_runs_stale(before=now - grace) if not waiting else []
    for run_id in panels:
        _judge_task_send(TASK_PANEL_COMBINE, args=[run_id])
    return len(taken_back) + len(stale) + len(panels)


def _broker_error() -> str:
    """'' when the broker answers, else why not; asked at most every BROKER_CHECK_INTERVAL."""
    seen = _broker_seen.get("last")
    if seen is not None and time.monotonic() - seen[0] < BROKER_CHECK_INTERVAL:
        return seen[1]
    try:
        broker_check()
        error = ""
    except BrokerUnavailable as exc:
        error = str(exc).replace(" Nothing was queued.", "")
    _broker_seen["last"] = (time.monotonic(), error)
    return error


def judge_run_health_check(*, run: JudgeRun) -> JudgeRun:
    """Note on a running run that the broker is unreachable (or that it answers again).

    Called when a researcher looks at the run: workers cannot report a broker they cannot reach,
    so the web process asks it. The first time it fails is kept as "since". Returns the run with
    its stall fields up to date.
    """
    if run.status != JudgeRun.Status.RUNNING:
        return run
    error = _broker_error()
    if error:
        run_stall_note(run_id=run.pk, reason=f"{BROKER_STALL}: {error}")
    elif run.stall_reason.startswith(BROKER_STALL):
        run_stall_clear(run_id=run.pk, prefix=BROKER_STALL)
    else:
        return run
    run.refresh_from_db(fields=["stall_reason", "stall_since"])
    return run
