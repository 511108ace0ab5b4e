"""A PL run's scoring of the study's Contrast Instructions, stored for the report to read.

The report's consistency section (docs/consistency.md) needs, per PL run, the four scores
h(I_A, r_A), h(I_A, r_B), h(I_B, r_A), h(I_B, r_B) of each contrast pair, and for RewardFusion
the embeddings of those four "question\\n\\nanswer" texts and of every answer the run scored.
All of it depends on the model (its head or checkpoint and its sentence encoder), which lives
here, outside the report's code version; so the reward_model worker computes it once per
(run, contrast set) and stores it in a `ContrastScoring` row, and the report only reads the row
and runs the fusion (leaderboard.selectors.contrast.score_consistency_read).

When it runs:

- as the last step of a PL run's scoring (judges.reward.scoring), on the study's latest contrast
  set; a failure here is recorded on the scoring row, the run's pair verdicts stay done;
- when a contrast set is built (leaderboard.services.contrast.contrast_set_build), for every
  done PL run of the study, queued after commit (:func:`contrast_scorings_queue`, the task
  `judges.contrast_score`);
- by the PL runs' reconciler (:func:`contrast_scorings_reconcile`), for a scoring whose worker
  died (running past its lease) and for one whose message was lost (no row, the set and the
  run older than the grace period), once the reward_model queue is empty.

A row is claimed by one conditional UPDATE (pending or failed, or running with a lease that ran
out) that writes a fresh token; the model works outside any transaction; the result, or the
failure with its reason, is written only while the row still carries the token. A done row is
never computed again, so running the task twice stores one scoring.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from annotation.models import ContrastPair, ContrastSet, Study
from core.broker import BrokerUnavailable, queue_length, task_send
from core.queues import Queue
from core.tasks import failure_reason
from judges.models import AnswerScore, ContrastScoring, Judge, JudgeRun
from judges.reward.arrays import array_bytes
from judges.reward.selectors import ContrastScores

logger = logging.getLogger(__name__)

TASK_CONTRAST_SCORE = "judges.contrast_score"
# How long a claim holds its row: above the task's hard time limit (judges.tasks.
# PL_TIME_LIMIT, 7,500 s; tests/judges/reward/test_contrast_scoring.py checks it), so a row is
# taken back only from a worker that no longer runs. A message redelivered after its worker
# died arrives after the broker's visibility timeout (an hour), when the lease may still hold;
# the next request (a contrast set built, the demo set up again) then takes the row back.
LEASE_SECONDS = 7800


def turns_text(turns: object) -> str:
    """All turns of a prompt or an answer joined by blank lines, as the PL model reads them."""
    return "\n\n".join(str(t) for t in turns) if isinstance(turns, list) else ""


def contrast_scores_compute(*, run: JudgeRun, contrast_set: ContrastSet) -> ContrastScores:
    """Score the contrast set's four combinations with the run's model and embed what the fusion
    retrieves with; nothing is stored, no transaction is opened.

    For each contrast pair (in id order), h(I_A, r_A), h(I_A, r_B), h(I_B, r_A), h(I_B, r_B)
    with the texts the PL model scores (all user turns of the prompt, all turns of the answer).
    The embedding of a fusion example is that of its "question\\n\\nanswer" text, with the
    model's backbone encoder (the default encoder for a Hugging Face checkpoint): the four
    queries of each pair, and every answer the run scored (AnswerScore, by answer id). Raise
    ArtifactMissing when the run's model is gone.
    """
    from judges.reward.artifacts import artifact_load
    from judges.reward.calibration import artifact_temperature
    from judges.reward.encoder import DEFAULT_BACKBONE, embed_texts

    model = artifact_load(str(run.judge.params.get("artifact", "")))
    pairs = list(
        ContrastPair.objects.filter(contrast_set=contrast_set)
        .select_related("prompt_a", "prompt_b", "answer_a", "answer_b")
        .order_by("pk")
    )
    questions, answers = [], []
    for c in pairs:
        q_a, q_b = turns_text(c.prompt_a.turns), turns_text(c.prompt_b.turns)
        r_a, r_b = turns_text(c.answer_a.turns), turns_text(c.answer_b.turns)
        questions += [q_a, q_a, q_b, q_b]
        answers += [r_a, r_b, r_a, r_b]
    scores = np.asarray(model.score(questions, answers), dtype=np.float64)
    backbone = str(model.metadata.get("backbone") or DEFAULT_BACKBONE)
    scored = list(
        AnswerScore.objects.filter(run=run)
        .order_by("answer_id")
        .values_list("answer_id", "answer__prompt__turns", "answer__turns")
    )
    queries = embed_texts(
        [f"{q}\n\n{a}" for q, a in zip(questions, answers, strict=True)], backbone=backbone
    )
    vectors = (
        embed_texts(
            [f"{turns_text(q)}\n\n{turns_text(a)}" for _, q, a in scored], backbone=backbone
        )
        if scored
        else np.empty((0, queries.shape[1]))
    )
    return ContrastScores(
        pairs=len(pairs),
        scores=scores,
        query_vectors=queries,
        answer_ids=np.array([answer_id for answer_id, _, _ in scored], dtype=np.int64),
        answer_vectors=vectors,
        backbone=backbone,
        temperature=artifact_temperature(model.metadata) or 1.0,
    )


def _row(run_id: int, contrast_set_id: int) -> Q:
    return Q(run_id=run_id, contrast_set_id=contrast_set_id)


def contrast_scoring_claim(*, run_id: int, contrast_set_id: int) -> str | None:
    """Take the scoring of (run, contrast set) for this worker; return the lease's token, or
    None when it is done or another worker holds it.

    Creates the pending row when there is none (the unique constraint keeps one), then one
    conditional UPDATE: pending or failed, or running with a lease that ran out.
    """
    ContrastScoring.objects.bulk_create(
        [ContrastScoring(run_id=run_id, contrast_set_id=contrast_set_id)], ignore_conflicts=True
    )
    token = secrets.token_hex(16)
    now = timezone.now()
    claimed = (
        ContrastScoring.objects.filter(_row(run_id, contrast_set_id))
        .filter(
            Q(status__in=[ContrastScoring.Status.PENDING, ContrastScoring.Status.FAILED])
            | Q(status=ContrastScoring.Status.RUNNING, lease_expires_at__lt=now)
        )
        .update(
            status=ContrastScoring.Status.RUNNING,
            lease_token=token,
            lease_expires_at=now + timedelta(seconds=LEASE_SECONDS),
            started_at=now,
            finished_at=None,
            error="",
            attempts=F("attempts") + 1,
        )
    )
    return token if claimed == 1 else None


def contrast_scoring_run(*, run_id: int, contrast_set_id: int) -> str:
    """Compute and store a done PL run's scoring of a contrast set; return what became of it:
    "done", "failed" (the reason on the row), "skipped" (done already, or held by another
    worker) or "missing" (no such done PL run or set).

    Holds no lock while the model works; the result is written by one conditional UPDATE on the
    claim's token.
    """
    run = (
        JudgeRun.objects.select_related("judge")
        .filter(pk=run_id, status=JudgeRun.Status.DONE, judge__kind=Judge.Kind.PL)
        .first()
    )
    contrast_set = ContrastSet.objects.filter(pk=contrast_set_id).first()
    if run is None or contrast_set is None or contrast_set.study_id != run.study_id:
        return "missing"
    token = contrast_scoring_claim(run_id=run_id, contrast_set_id=contrast_set_id)
    if token is None:
        return "skipped"
    mine = ContrastScoring.objects.filter(_row(run_id, contrast_set_id), lease_token=token)
    try:
        found = contrast_scores_compute(run=run, contrast_set=contrast_set)
    except Exception as exc:
        logger.exception("contrast scoring of run %s, set %s failed", run_id, contrast_set_id)
        mine.filter(status=ContrastScoring.Status.RUNNING).update(
            status=ContrastScoring.Status.FAILED,
            error=failure_reason(exc)[:2000],
            finished_at=timezone.now(),
            lease_token="",
        )
        return "failed"
    written = mine.filter(status=ContrastScoring.Status.RUNNING).update(
        status=ContrastScoring.Status.DONE,
        pairs=found.pairs,
        scores=array_bytes(found.scores),
        query_vectors=array_bytes(found.query_vectors),
        answer_ids=array_bytes(found.answer_ids),
        answer_vectors=array_bytes(found.answer_vectors),
        backbone=found.backbone,
        temperature=found.temperature,
        finished_at=timezone.now(),
        lease_token="",
    )
    return "done" if written == 1 else "skipped"


def latest_contrast_set(*, study_id: int) -> ContrastSet | None:
    """The study's latest contrast set, the one the report reads."""
    return ContrastSet.objects.filter(study_id=study_id).order_by("-pk").first()


def contrast_scoring_after_run(*, run: JudgeRun) -> str:
    """The last step of a PL run's scoring: score the study's latest contrast set with the run
    ("none" without one). Never raises for the run: a failure is the scoring row's, and a
    database error here is logged (the next contrast set build, or the demo set up again,
    scores it)."""
    contrast_set = latest_contrast_set(study_id=run.study_id)
    if contrast_set is None:
        return "none"
    try:
        return contrast_scoring_run(run_id=run.pk, contrast_set_id=contrast_set.pk)
    except Exception:
        logger.exception("PL run %s: contrast scoring not stored", run.pk)
        return "failed"


def _send(run_id: int, contrast_set_id: int) -> None:
    try:
        task_send(TASK_CONTRAST_SCORE, args=[run_id, contrast_set_id], queue=Queue.REWARD_MODEL)
    except BrokerUnavailable:
        # The set is stored; building it again (idempotent) queues what is still missing.
        logger.warning("contrast scoring of run %s not queued: the broker refused", run_id)


def contrast_scorings_queue(*, study: Study) -> list[int]:
    """Queue, once the open transaction commits, the scoring of the study's latest contrast set
    by each of its done PL runs that has no done scoring of it; return those runs' ids."""
    contrast_set = latest_contrast_set(study_id=study.pk)
    if contrast_set is None:
        return []
    done = ContrastScoring.objects.filter(
        run_id=OuterRef("pk"), contrast_set=contrast_set, status=ContrastScoring.Status.DONE
    )
    run_ids = list(
        JudgeRun.objects.filter(study=study, status=JudgeRun.Status.DONE, judge__kind=Judge.Kind.PL)
        .exclude(Exists(done))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    set_id = contrast_set.pk
    for run_id in run_ids:
        transaction.on_commit(lambda run_id=run_id: _send(run_id, set_id))  # type: ignore[misc]
    return run_ids


def _lost(now: datetime) -> list[tuple[int, int]]:
    """(run, set) of the scorings whose work was lost: running past the lease (the worker died:
    the lease outlasts the task's hard limit), or never started though the study's latest set
    and a done PL run have both been there for the grace period (the message was refused or
    lost). A failed scoring is not among them: it has its reason, and building the set again
    tries it again."""
    before = now - timedelta(seconds=settings.CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS)
    dead = list(
        ContrastScoring.objects.filter(
            status=ContrastScoring.Status.RUNNING, lease_expires_at__lt=now
        ).values_list("run_id", "contrast_set_id")
    )
    latest = ContrastSet.objects.filter(study_id=OuterRef("study_id")).order_by("-pk")
    never = list(
        JudgeRun.objects.filter(
            status=JudgeRun.Status.DONE, judge__kind=Judge.Kind.PL, finished_at__lt=before
        )
        .annotate(latest_set=latest.values("pk")[:1], latest_at=latest.values("created_at")[:1])
        .filter(latest_set__isnull=False, latest_at__lt=before)
        .exclude(
            Exists(
                ContrastScoring.objects.filter(
                    run_id=OuterRef("pk"), contrast_set_id=OuterRef("latest_set")
                )
            )
        )
        .values_list("pk", "latest_set")
    )
    return sorted(set(dead) | set(never))


def contrast_scorings_reconcile(*, now: datetime | None = None) -> int:
    """Queue again the contrast scorings whose work was lost (:func:`_lost`); return how many
    were sent.

    Nothing is sent while messages wait in the reward_model queue (the lost scoring's own may be
    among them, behind a long training). A message sent twice stores one scoring: the second
    finds the row claimed or done and does nothing.
    """
    now = now or timezone.now()
    lost = _lost(now)
    if not lost:
        return 0
    waiting = queue_length(Queue.REWARD_MODEL)
    if waiting:
        logger.info(
            "contrast scoring reconciler: %d messages still wait in the reward_model queue; "
            "%d lost scorings not sent again",
            waiting,
            len(lost),
        )
        return 0
    sent = 0
    for run_id, set_id in lost:
        try:
            task_send(TASK_CONTRAST_SCORE, args=[run_id, set_id], queue=Queue.REWARD_MODEL)
        except BrokerUnavailable:
            logger.warning("contrast scoring of run %s not sent again: the broker refused", run_id)
            break
        sent += 1
    logger.warning("contrast scoring reconciler: %d lost scorings sent again", sent)
    return sent
