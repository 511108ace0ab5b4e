"""Scoring: a PL judge's run scores each answer once, then derives every pair's verdict.

A run of a PL judge is a judge run like any other. Its worker scores every answer of the run's
pairs that the judge has not scored yet (batched; `AnswerScore` rows, one per run and answer;
an answer an earlier run of the same judge scored is copied, not scored again), then writes one
judge call per pair, shown A first, in one transaction with the run's done status. Its last
step scores the study's latest contrast set for the report (judges.reward.contrast), after the
run is done, so that a failure there leaves the run's verdicts done. The model is
order-invariant by construction (each answer is scored alone), which the judge records
(`Judge.order_invariant`), so one order per pair says everything.

A contrast item (`Pair.contrast` set) shows the prompt I_A with its own best answer r_A and the
best answer r_B of another prompt I_B, and asks which answers I_A better. Its call compares
h(I_A, r_A) with h(I_A, r_B): both answers are scored under the item's prompt. h(I_A, r_A) is
r_A's stored score; the cross score h(I_A, r_B) is computed by the same task each time it runs
(one per contrast item, so cheap) and kept on the call's `score_a`/`score_b` only, since an
`AnswerScore` holds an answer's score under its own prompt.

While its answers are scored the run stays *pending*: the LLM calls' reconciler looks only at
running runs, and a pending run with no calls is neither re-queued nor marked done by it.

The scoring worker's lease. A worker claims the run with one conditional UPDATE (pending, no
live lease, fewer than CONCORD_REWARD_SCORE_MAX_ATTEMPTS claims so far) that writes a fresh
token, the lease's end and the heartbeat, and counts the attempt; a thread of the worker renews
the lease every quarter of CONCORD_REWARD_SCORE_LEASE_SECONDS while the run is scored, and
every write of the worker (each batch of scores, the calls with the done status, a failure)
holds only while the row still carries its token. A worker killed mid-run leaves its message
unacknowledged in Redis until the broker's visibility timeout (an hour); instead its heartbeat
stops and `pl_runs_reconcile` (beat, on the reconciler's queue) queues the run again once the
lease has run out, or marks it failed after the last attempt, saying why. The answers scored
before the kill are stored per batch, so the next worker scores only the rest.

A lost message. A run whose message never reaches a worker (lost by the broker, purged, or
sent to a queue nobody took from before a restart) would stay pending with no lease forever:
nothing would ever claim it. The run keeps when its message was last sent (`score_queued_at`:
start, resume, the reconciler), and the reconciler sends another to a run that no worker
claimed for CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS after that, but only while no message
waits in the reward_model queue (behind a long training its own message is still in line).
The re-send is taken by one conditional UPDATE (pending, unclaimed, last sent before the grace
period) before the message goes out, so two reconcilers send one message, and a run a worker
claimed in the meantime is not sent again; a copy that arrives after all finds the lease live
(or the run done) and does nothing, so a run is never scored twice at once.

The Likert rule. With scores h_A and h_B, P(B better) = sigmoid((h_B - h_A) / T) (Bradley-Terry,
the PL model for two answers, with the temperature T the training fitted on its held-out pairs:
:mod:`judges.reward.calibration`; T = 1, "uncalibrated", for an artifact from before the fit),
and the canonical Likert score is

    likert = min(8, floor(8 * P) + 1),

eight equal bins of probability: P < 1/8 -> 1 (A much better), ..., 3/8 <= P < 1/2 -> 4 and
1/2 <= P < 5/8 -> 5 (about equal, the two sides), ..., P >= 7/8 -> 8 (B much better). So the
collapsed preference is A for P < 3/8, a tie for 3/8 <= P < 5/8, B for P >= 5/8, and swapping
A and B gives 9 - likert except on a bin edge.
"""

from __future__ import annotations

import logging
import random
import secrets
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.db.models.expressions import Func
from django.db.models.functions import Coalesce
from django.db.models.query import QuerySet
from django.utils import timezone

from annotation.models import Answer, Pair, Prompt, Study
from annotation.services.judgments import likert_preference
from core.broker import BrokerUnavailable, broker_check, task_send
from core.errors import ApplicationError
from core.queues import Queue
from core.tasks import failure_reason
from judges.kinds import RunPlan
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun
from judges.reward.calibration import (
    UNCALIBRATED,
    artifact_temperature,
    likert_from_probability,
    probability_b,
)
from judges.reward.contrast import contrast_scoring_after_run, contrast_scorings_reconcile
from judges.reward.data import question_text
from judges.reward.resend import LostMessage, resend_take, resend_unclaimed
from judges.services.limits import study_run_place_take

logger = logging.getLogger(__name__)

TASK_SCORE_RUN = "judges.pl_score_run"
# The prefix of a failed scoring's `note`; the run page shows what follows it.
FAILED_NOTE = "scoring failed: "


class RunCancelled(ApplicationError):
    """The run stopped being pending, or another attempt took it, while it was scored."""

    http_status = 409


def queue_on_commit(task: str, object_id: int) -> None:
    """Send `task` with the id to the reward_model queue once the open transaction commits."""
    transaction.on_commit(lambda: task_send(task, args=[object_id], queue=Queue.REWARD_MODEL))


def pl_judge_readiness(*, judge: Judge) -> str:
    """ "" when the PL judge's artifact is on disk, else what is missing."""
    from judges.reward.artifacts import ArtifactMissing, artifact_metadata

    try:
        artifact_metadata(str(judge.params.get("artifact", "")))
    except ArtifactMissing as exc:
        return f"not ready: {exc}"
    return ""


def pl_run_plan(*, study: Study, pairs: Iterable[Pair] | None, seed: int | None) -> RunPlan:
    """Plan a PL judge's run (judges.kinds): pending until a reward_model worker scores each
    answer once and derives one order-invariant call per pair (pl_run_execute).

    Raise ValidationError for pairs of another study or none.
    """
    from judges.services.runs import run_pairs_checked

    return RunPlan(
        pairs=run_pairs_checked(study=study, pairs=pairs),
        status=JudgeRun.Status.PENDING,
        seed=seed if seed is not None else random.SystemRandom().randrange(2**31),
        send=lambda run_id: task_send(TASK_SCORE_RUN, args=[run_id], queue=Queue.REWARD_MODEL),
        note="PL scoring: each answer scored once, one order-invariant call per pair",
        columns={"score_queued_at": timezone.now()},
    )


def pl_run_resume(*, run: JudgeRun) -> JudgeRun:
    """Queue a cancelled PL run's scoring again: it goes on from the answers already scored.

    The caller checked the user's permission and the judge's readiness.
    """
    broker_check()
    with transaction.atomic():
        study_run_place_take(study=run.study, exclude_run_id=run.pk)
        # A new start: the attempts a researcher resumes are counted afresh.
        changed = JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.CANCELLED).update(
            status=JudgeRun.Status.PENDING,
            finished_at=None,
            score_attempts=0,
            score_lease_token="",
            score_lease_expires_at=None,
            score_queued_at=timezone.now(),
            score_resent_at=None,
            score_resends=0,
        )
        if changed != 1:
            run.refresh_from_db()
            raise ValidationError(
                f"run {run.pk} is {run.get_status_display().lower()}; only a cancelled run of a "
                "PL judge can be resumed"
            )
        queue_on_commit(TASK_SCORE_RUN, run.pk)
    run.refresh_from_db()
    return run


def _lease() -> timedelta:
    return timedelta(seconds=settings.CONCORD_REWARD_SCORE_LEASE_SECONDS)


def _mine(run_id: int, token: str) -> QuerySet[JudgeRun]:
    """The run's row, only while it is pending and the attempt with `token` holds it."""
    return JudgeRun.objects.filter(
        pk=run_id, status=JudgeRun.Status.PENDING, score_lease_token=token
    )


def _pl_judges() -> QuerySet[Judge, int]:
    """The PL judges' ids, for a run's filter that must not join the judge's table.

    An UPDATE filtered through a join is written by Django as `id IN (SELECT ... JOIN ...)`,
    and PostgreSQL, when a concurrent UPDATE changed the row first, rechecks only the outer
    conditions on the new row, not that subquery's: two claims at once would both succeed. A
    filter on `judge_id IN (the PL judges)` keeps the run's own conditions outer, rechecked.
    """
    return Judge.objects.filter(kind=Judge.Kind.PL).values_list("pk", flat=True)


def pl_run_claim(*, run_id: int) -> str | None:
    """Take a pending PL run's scoring for this worker; return the lease's token, or None.

    One conditional UPDATE: the run must be pending, hold no live lease (none, or one that ran
    out) and have had fewer than CONCORD_REWARD_SCORE_MAX_ATTEMPTS claims; the claim counts one.
    Two claims at once (two copies of the message) give one token.
    """
    token = secrets.token_hex(16)
    now = timezone.now()
    claimed = JudgeRun.objects.filter(
        Q(score_lease_token="") | Q(score_lease_expires_at__lt=now),
        pk=run_id,
        status=JudgeRun.Status.PENDING,
        judge_id__in=_pl_judges(),
        score_attempts__lt=settings.CONCORD_REWARD_SCORE_MAX_ATTEMPTS,
    ).update(
        score_lease_token=token,
        score_lease_expires_at=now + _lease(),
        score_heartbeat_at=now,
        score_attempts=F("score_attempts") + 1,
        started_at=Coalesce(F("started_at"), now),
    )
    return token if claimed == 1 else None


def pl_run_heartbeat(*, run_id: int, token: str) -> bool:
    """Renew the lease of the attempt with `token`; False once the run is no longer its."""
    now = timezone.now()
    return (
        _mine(run_id, token).update(score_heartbeat_at=now, score_lease_expires_at=now + _lease())
        == 1
    )


@contextmanager
def _heartbeat(run_id: int, token: str) -> Iterator[None]:
    """Renew the lease from a thread of its own while the block runs (a batch of scores may take
    longer than the lease; the thread beats while the model computes)."""
    stop = threading.Event()
    every = max(0.2, settings.CONCORD_REWARD_SCORE_LEASE_SECONDS / 4)

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    if not pl_run_heartbeat(run_id=run_id, token=token):
                        return
                except DatabaseError:
                    # A dropped connection: the next beat opens another; if the database stays
                    # away past the lease, the run is taken back, which is what should happen.
                    logger.warning("PL run %s: heartbeat not written", run_id, exc_info=True)
                    connection.close()
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"pl-run-{run_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 5)


def _still_mine(run_id: int, token: str) -> None:
    if not _mine(run_id, token).exists():
        raise RunCancelled


def answers_score(*, run: JudgeRun, answer_ids: list[int], token: str) -> dict[int, float]:
    """The run's score of every answer: stored, copied from the judge's earlier runs, or new.

    New scores are computed in batches of CONCORD_REWARD_SCORE_BATCH and stored after each
    batch, so the attempt after a killed worker's goes on where it stopped. Raise RunCancelled
    when, before a batch, the attempt with `token` no longer holds the run.
    """
    scores = dict(
        AnswerScore.objects.filter(run=run, answer_id__in=answer_ids).values_list(
            "answer_id", "score"
        )
    )
    earlier = dict(
        AnswerScore.objects.filter(run__judge_id=run.judge_id, answer_id__in=answer_ids)
        .exclude(run=run)
        .exclude(answer_id__in=list(scores))
        .values_list("answer_id", "score")
    )
    if earlier:
        AnswerScore.objects.bulk_create(
            [AnswerScore(run=run, answer_id=a, score=s) for a, s in earlier.items()],
            ignore_conflicts=True,
        )
        scores.update(earlier)
    missing = [a for a in answer_ids if a not in scores]
    if not missing:
        return scores
    from judges.reward.artifacts import artifact_load

    model = artifact_load(str(run.judge.params["artifact"]))
    rows = {
        pk: (question_text(turns), "\n\n".join(answer_turns or []))
        for pk, turns, answer_turns in Answer.objects.filter(pk__in=missing).values_list(
            "pk", "prompt__turns", "turns"
        )
    }
    batch = settings.CONCORD_REWARD_SCORE_BATCH
    for start in range(0, len(missing), batch):
        _still_mine(run.pk, token)
        chunk = missing[start : start + batch]
        values = model.score([rows[a][0] for a in chunk], [rows[a][1] for a in chunk])
        AnswerScore.objects.bulk_create(
            [
                AnswerScore(run=run, answer_id=a, score=float(v))
                for a, v in zip(chunk, values, strict=True)
            ],
            ignore_conflicts=True,
        )
        scores.update({a: float(v) for a, v in zip(chunk, values, strict=True)})
    return scores


def cross_scores(*, run: JudgeRun, items: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """h(I, r) of each (prompt id, answer id) in `items`, an answer scored under another
    prompt (a contrast item's), with the run's model; nothing is stored."""
    if not items:
        return {}
    from judges.reward.artifacts import artifact_load

    model = artifact_load(str(run.judge.params["artifact"]))
    prompts = dict(Prompt.objects.filter(pk__in={p for p, _ in items}).values_list("pk", "turns"))
    answers = dict(Answer.objects.filter(pk__in={a for _, a in items}).values_list("pk", "turns"))
    values = model.score(
        [question_text(prompts[p]) for p, _ in items],
        ["\n\n".join(answers[a] or []) for _, a in items],
    )
    return {item: float(v) for item, v in zip(items, values, strict=True)}


def judge_temperature(judge: Judge) -> float | None:
    """The fitted temperature of the judge's artifact, None when uncalibrated or missing."""
    from judges.reward.artifacts import ArtifactMissing, artifact_metadata

    try:
        return artifact_temperature(artifact_metadata(str(judge.params.get("artifact", ""))))
    except ArtifactMissing:
        return None


def pair_call(
    *,
    run: JudgeRun,
    pair_id: int,
    score_a: float,
    score_b: float,
    cross: bool = False,
    temperature: float | None = None,
) -> JudgeCall:
    """The judge call of one pair derived from two answer scores (A shown first); `cross` says
    that both were scored under the pair's prompt, one answer being another prompt's;
    `temperature` is the artifact's fitted T (None: uncalibrated, T = 1)."""
    t = temperature if temperature is not None else UNCALIBRATED
    p = probability_b(score_a, score_b, t)
    likert = likert_from_probability(p)
    now = timezone.now()
    request: dict[str, object] = {
        "pl_artifact": run.judge.params.get("artifact", ""),
        "order_invariant": True,
        "temperature": temperature,
    }
    if cross:
        request["scored_under_item_prompt"] = True
    return JudgeCall(
        run=run,
        pair_id=pair_id,
        order=JudgeCall.Order.A_FIRST,
        status=JudgeCall.Status.DONE,
        request=request,
        raw_output=(
            f"h_A={score_a:.6f} h_B={score_b:.6f} "
            + (f"T={t:.6f}" if temperature is not None else "T=1 (uncalibrated)")
            + f" P(B better)={p:.6f}"
        ),
        likert_shown=likert,
        likert=likert,
        preference=likert_preference(likert),
        verdict_label=f"P(B)={p:.3f}",
        score_a=score_a,
        score_b=score_b,
        attempts=1,
        latency_ms=0,
        finished_at=now,
    )


def pl_run_execute(*, run_id: int) -> str:
    """Claim a pending PL run, score its answers and write its calls; return what became of it.

    Holds no lock; the lease (pl_run_claim) is renewed by a heartbeat thread while it runs, and
    every write is conditional on the lease's token, so an attempt that lost the run (cancelled,
    or taken back by the reconciler) writes nothing more.
    """
    run = JudgeRun.objects.select_related("judge").filter(pk=run_id).first()
    if run is None:
        return "missing"
    if run.status != JudgeRun.Status.PENDING or run.judge.kind != Judge.Kind.PL:
        return "skipped"
    token = pl_run_claim(run_id=run_id)
    if token is None:
        # Another worker holds a live lease (a copy of the message), or the run changed.
        return "skipped"
    with _heartbeat(run_id, token):
        return _score(run, token)


def _score(run: JudgeRun, token: str) -> str:
    run_id = run.pk
    pairs = list(
        run.pairs.order_by("pk").values_list(
            "pk", "prompt_id", "contrast_id", "answer_a_id", "answer_b_id"
        )
    )
    answer_prompt = dict(
        Answer.objects.filter(
            pk__in={a for _, _, c, x, y in pairs if c is not None for a in (x, y)}
        ).values_list("pk", "prompt_id")
    )
    foreign = sorted(
        {
            (p, a)
            for _, p, c, x, y in pairs
            if c is not None
            for a in (x, y)
            if answer_prompt[a] != p
        }
    )
    answer_ids = sorted({a for _, _, _, x, y in pairs for a in (x, y)})
    try:
        scores = answers_score(run=run, answer_ids=answer_ids, token=token)
        crossed = cross_scores(run=run, items=foreign)
        temperature = judge_temperature(run.judge)

        def under(prompt_id: int, answer_id: int) -> float:
            return crossed.get((prompt_id, answer_id), scores[answer_id])

        calls = [
            pair_call(
                run=run,
                pair_id=pk,
                score_a=under(p, a),
                score_b=under(p, b),
                cross=contrast is not None,
                temperature=temperature,
            )
            for pk, p, contrast, a, b in pairs
        ]
        with transaction.atomic():
            # The row lock first: the calls are written only by the attempt holding the run.
            if not list(_mine(run_id, token).select_for_update().values_list("pk", flat=True)):
                raise RunCancelled
            JudgeCall.objects.bulk_create(calls, batch_size=2000, ignore_conflicts=True)
            _mine(run_id, token).update(status=JudgeRun.Status.DONE, finished_at=timezone.now())
    except RunCancelled:
        status = JudgeRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        return "cancelled" if status == JudgeRun.Status.CANCELLED else "taken back"
    except Exception as exc:
        logger.exception("PL run %s failed", run_id)
        _mine(run_id, token).update(
            status=JudgeRun.Status.FAILED,
            note=f"{FAILED_NOTE}{failure_reason(exc)}"[:2000],
            finished_at=timezone.now(),
        )
        return "failed"
    # The last step, after the run is done: its scores of the study's latest contrast set, for
    # the report's consistency section. Its failure is the scoring row's, not the run's: the
    # pair verdicts above stand whatever the contrast set's scoring does.
    contrast_scoring_after_run(run=run)
    return "done"


def _utc(moment: datetime) -> str:
    return timezone.localtime(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pl_runs_reconcile() -> int:
    """Queue again the pending PL runs whose scoring lease ran out, and send again those whose
    message no worker claimed (see "A lost message" above); return how many changed.

    A lease runs out when its worker stopped beating (killed, or away from the database for
    longer than the lease). The run is sent to the reward_model queue again (first, so that a
    broker that refuses leaves it for the next round), then marked re-queued only while the
    same lease still holds it; a run that used its last attempt is failed instead, with the
    reason in its note. Safe to run twice at once: a second copy of the message finds the run
    claimed and does nothing. Last, the contrast scorings whose work was lost are sent again
    (judges.reward.contrast.contrast_scorings_reconcile).
    """
    now = timezone.now()
    expired = list(
        JudgeRun.objects.filter(
            status=JudgeRun.Status.PENDING,
            judge__kind=Judge.Kind.PL,
            score_lease_expires_at__lt=now,
        )
        .exclude(score_lease_token="")
        .values_list("pk", "score_lease_token", "score_attempts", "score_heartbeat_at")
    )
    changed = 0
    most = settings.CONCORD_REWARD_SCORE_MAX_ATTEMPTS
    for run_id, token, attempts, beat in expired:
        lost = _mine(run_id, token).filter(score_lease_expires_at__lt=now)
        last = f"last heartbeat {_utc(beat)}" if beat is not None else "no heartbeat"
        if attempts >= most:
            changed += lost.update(
                status=JudgeRun.Status.FAILED,
                note=(
                    f"{FAILED_NOTE}the worker scoring it was lost {attempts} times (its lease of "
                    f"{settings.CONCORD_REWARD_SCORE_LEASE_SECONDS:g} s ran out; {last}); the "
                    "answers scored so far are kept and a new run of this judge reuses them"
                ),
                finished_at=now,
                score_lease_token="",
            )
            continue
        try:
            task_send(TASK_SCORE_RUN, args=[run_id], queue=Queue.REWARD_MODEL)
        except BrokerUnavailable:
            logger.warning("PL run %s: not queued again, the broker refused", run_id)
            continue
        changed += lost.update(
            score_lease_token="",
            score_lease_expires_at=None,
            score_requeued_at=now,
            score_queued_at=now,
        )
    if changed:
        logger.warning("PL runs reconciler: %d runs whose worker was lost queued again", changed)
    return changed + resend_unclaimed(RUN_MESSAGE, now) + contrast_scorings_reconcile(now=now)


def last_queued_at() -> Func:
    """When a run's scoring message was last sent (a run from before `score_queued_at` was
    kept: its last re-queue, else its creation)."""
    return Coalesce("score_queued_at", "score_requeued_at", "created_at")


def _unclaimed() -> QuerySet[JudgeRun]:
    """Pending PL runs that no worker holds: their message waits, or was lost."""
    return JudgeRun.objects.filter(
        status=JudgeRun.Status.PENDING, judge_id__in=_pl_judges(), score_lease_token=""
    )


# A run's scoring message, sent again by pl_runs_reconcile when lost (judges.reward.resend).
RUN_MESSAGE = LostMessage(
    what="PL run",
    task=TASK_SCORE_RUN,
    grace_setting="CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS",
    unclaimed=_unclaimed,
    last_sent=last_queued_at,
    queued_field="score_queued_at",
    resent_field="score_resent_at",
    count_field="score_resends",
)


def pl_run_resend_take(*, run_id: int, before: datetime, now: datetime) -> bool:
    """Take the re-send of an unclaimed pending PL run last sent before `before`; True when
    this call took it (the caller then sends the message). See resend_take: the run must be
    pending, held by no worker (no lease token) and last sent before `before`."""
    return resend_take(RUN_MESSAGE, pk=run_id, before=before, now=now)
