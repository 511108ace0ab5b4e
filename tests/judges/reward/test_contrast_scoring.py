"""A PL run scores the study's contrast set once, on the reward_model worker, and stores it; the
report's consistency section only reads the stored scores (judges.reward.contrast)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.conf import LazySettings
from django.utils import timezone

from annotation.models import Answer, ContrastPair, ContrastSet, Prompt, Study
from annotation.services.contrast import ContrastPairSpec, contrast_set_store
from core.broker import task_send
from core.queues import Queue
from judges import tasks
from judges.models import AnswerScore, ContrastScoring, Judge, JudgeRun
from judges.reward import artifacts
from judges.reward.contrast import (
    LEASE_SECONDS,
    TASK_CONTRAST_SCORE,
    contrast_scoring_claim,
    contrast_scoring_run,
)
from judges.reward.scoring import pl_run_execute, pl_runs_reconcile
from judges.services.runs import judge_run_start
from leaderboard.selectors.contrast import ScoreJudgeConsistency, score_consistency_read
from leaderboard.selectors.snapshots import study_data_fingerprint
from leaderboard.services.contrast import contrast_set_build
from leaderboard.services.reports import agreement_report_snapshot
from leaderboard.stats.consistency import (
    DEFAULT_FUSION_DELTA,
    fusion_retrieval,
    reward_fusion,
)
from tests.conftest import Cast
from tests.judges.reward.conftest import queued, ranked_study
from tests.judges.reward.test_services import train

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Scored:
    judge: Judge
    run: JudgeRun


def _trained_run(cast: Cast) -> Scored:
    """A PL judge trained on 12 ranked prompts and its run on the study, done."""
    ranked_study(cast.study, prompts=12)
    judge = train(cast, epochs=30).judge
    assert judge is not None
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert pl_run_execute(run_id=run.pk) == "done"
    return Scored(judge, run)


def _contrast_set(study: Study) -> ContrastSet:
    """Four contrast pairs of the study's first eight prompts, with their first-ranked answers."""
    prompts = list(Prompt.objects.filter(study=study).order_by("pk"))
    best = {a.prompt_id: a for a in Answer.objects.filter(prompt__study=study, rank=1)}
    return contrast_set_store(
        study=study,
        seed=0,
        low=0.75,
        high=0.9,
        best=ContrastSet.Best.FIRST_RANKED,
        system=None,
        backbone="all-MiniLM-L6-v2",
        pairs=[
            ContrastPairSpec(p.pk, q.pk, best[p.pk].pk, best[q.pk].pk, 0.8)
            for p, q in zip(prompts[0:8:2], prompts[1:8:2], strict=True)
        ],
    ).contrast_set


def _text(turns: object) -> str:
    return "\n\n".join(str(t) for t in turns) if isinstance(turns, list) else ""


def in_report_the_old_way(
    study: Study, run_ids: Sequence[int], delta: float = DEFAULT_FUSION_DELTA
) -> dict[int, ScoreJudgeConsistency]:
    """What the report computed before the scores were stored: the model loaded and run, the
    texts embedded, then RewardFusion (leaderboard.selectors.contrast before issue 24 part 4)."""
    from judges.reward.calibration import artifact_temperature
    from judges.reward.encoder import DEFAULT_BACKBONE, embed_texts

    contrast_set = ContrastSet.objects.filter(study=study).order_by("-pk").first()
    assert contrast_set is not None
    pairs = list(
        ContrastPair.objects.filter(contrast_set=contrast_set)
        .select_related("prompt_a", "prompt_b", "answer_a", "answer_b")
        .order_by("pk")
    )
    questions, answers = [], []
    pair_of_prompt: dict[int, int] = {}
    for k, c in enumerate(pairs):
        q_a, q_b = _text(c.prompt_a.turns), _text(c.prompt_b.turns)
        r_a, r_b = _text(c.answer_a.turns), _text(c.answer_b.turns)
        questions += [q_a, q_a, q_b, q_b]
        answers += [r_a, r_b, r_a, r_b]
        pair_of_prompt[c.prompt_a_id] = pair_of_prompt[c.prompt_b_id] = k
    query_groups = np.repeat(np.arange(len(pairs), dtype=np.int64), 4)
    own = {x for c in pairs for x in (c.answer_a_id, c.answer_b_id)}
    out: dict[int, ScoreJudgeConsistency] = {}
    for run in JudgeRun.objects.filter(pk__in=run_ids).select_related("judge").order_by("pk"):
        model = artifacts.artifact_load(str(run.judge.params["artifact"]))
        scores = np.asarray(model.score(questions, answers), dtype=np.float64)
        backbone = str(model.metadata.get("backbone") or DEFAULT_BACKBONE)
        scored = [
            (answer_id, prompt_id, f"{_text(q)}\n\n{_text(a)}", score)
            for answer_id, prompt_id, q, a, score in AnswerScore.objects.filter(run=run)
            .order_by("answer_id")
            .values_list(
                "answer_id", "answer__prompt_id", "answer__prompt__turns", "answer__turns", "score"
            )
        ]
        queries = embed_texts(
            [f"{q}\n\n{a}" for q, a in zip(questions, answers, strict=True)], backbone=backbone
        )
        vectors = embed_texts([text for _, _, text, _ in scored], backbone=backbone)
        all_scores = np.array([score for *_, score in scored], dtype=np.float64)
        prompt_ids = np.array([prompt_id for _, prompt_id, _, _ in scored], dtype=np.int64)
        train_groups = np.array(
            [pair_of_prompt.get(int(p), len(pairs) + int(p)) for p in prompt_ids], dtype=np.int64
        )
        in_pool = np.array([answer_id not in own for answer_id, *_ in scored], dtype=bool)
        pool = int(in_pool.sum())
        fused = reward_fusion(
            queries,
            scores,
            vectors[in_pool],
            all_scores[in_pool],
            delta=delta,
            query_groups=query_groups,
            train_groups=train_groups[in_pool],
        )
        fused_all = reward_fusion(
            vectors,
            all_scores,
            vectors,
            all_scores,
            delta=delta,
            query_groups=prompt_ids,
            train_groups=prompt_ids,
        )
        answer_ids = [answer_id for answer_id, *_ in scored]
        out[run.pk] = ScoreJudgeConsistency(
            scores=tuple(scores.tolist()),
            fused_scores=tuple(fused.scores.tolist()),
            delta=delta,
            pool=pool,
            retrieval=fusion_retrieval(fused, pool=pool),
            answer_retrieval=fusion_retrieval(fused_all, pool=len(scored)),
            temperature=artifact_temperature(model.metadata) or 1.0,
            answer_scores=dict(zip(answer_ids, all_scores.tolist(), strict=True)),
            fused_answer_scores=dict(zip(answer_ids, fused_all.scores.tolist(), strict=True)),
        )
    return out


def test_the_stored_scoring_gives_exactly_the_numbers_the_report_computed_from_the_model(
    cast: Cast, reward_dirs: Path
) -> None:
    scored = _trained_run(cast)
    contrast_set = _contrast_set(cast.study)
    assert contrast_scoring_run(run_id=scored.run.pk, contrast_set_id=contrast_set.pk) == "done"

    for delta in (DEFAULT_FUSION_DELTA, 0.5, 1.0):
        read = score_consistency_read(study=cast.study, run_ids=[scored.run.pk], delta=delta)
        old = in_report_the_old_way(cast.study, [scored.run.pk], delta)
        # Field for field, bit for bit: the dataclasses compare their floats exactly.
        assert read == old
        assert repr(read) == repr(old)
    row = ContrastScoring.objects.get()
    assert (row.pairs, row.backbone) == (4, "all-MiniLM-L6-v2")
    # The artifact's fitted temperature, which the judge's verdicts read too.
    assert row.temperature == read[scored.run.pk].temperature != 1.0


def test_a_report_computed_after_the_pl_artifact_is_deleted_still_has_the_judges_c_res_and_c_ins(
    cast: Cast, reward_dirs: Path
) -> None:
    scored = _trained_run(cast)
    contrast_set = _contrast_set(cast.study)
    assert contrast_scoring_run(run_id=scored.run.pk, contrast_set_id=contrast_set.pk) == "done"
    expected = score_consistency_read(study=cast.study, run_ids=[scored.run.pk])[scored.run.pk]
    # The model is gone: the report cannot load it, and does not need to.
    artifacts.artifact_remove(str(scored.judge.params["artifact"]))
    artifacts._load_cached.cache_clear()
    with pytest.raises(artifacts.ArtifactMissing):
        artifacts.artifact_load(str(scored.judge.params["artifact"]))

    payload = agreement_report_snapshot(study=cast.study).payload
    assert payload is not None
    (row,) = [r for r in payload["consistency"]["rows"] if r["source"] == scored.judge.name]
    plain = expected.plain()
    assert row["c_res"]["proportion"]["count"] == plain.c_res.proportion.count
    assert row["c_res"]["proportion"]["total"] == 4
    assert row["c_ins"] is not None
    assert row["c_ins"]["proportion"]["count"] == plain.c_ins.proportion.count


def test_the_scoring_task_run_twice_stores_one_scoring(cast: Cast, reward_dirs: Path) -> None:
    scored = _trained_run(cast)
    contrast_set = _contrast_set(cast.study)
    assert tasks.contrast_score(scored.run.pk, contrast_set.pk) == "done"
    first = ContrastScoring.objects.get()
    assert tasks.contrast_score(scored.run.pk, contrast_set.pk) == "skipped"
    second = ContrastScoring.objects.get()
    assert (second.pk, second.attempts, second.finished_at) == (
        first.pk,
        1,
        first.finished_at,
    )
    assert bytes(second.scores) == bytes(first.scores)


def test_a_contrast_set_built_after_a_pl_run_is_scored_once_the_build_commits(
    cast: Cast,
    reward_dirs: Path,
    broker: str,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    scored = _trained_run(cast)
    assert not ContrastScoring.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        built = contrast_set_build(study=cast.study, low=-1.0, high=1.0)
    # Nothing is queued before the build commits.
    assert queued(broker) == []
    for callback in callbacks:
        callback()
    contrast_set = built.stored.contrast_set
    assert queued(broker) == [(TASK_CONTRAST_SCORE, [scored.run.pk, contrast_set.pk])]
    # The reward_model worker takes the message.
    assert tasks.contrast_score(scored.run.pk, contrast_set.pk) == "done"
    assert score_consistency_read(study=cast.study, run_ids=[scored.run.pk]).keys() == {
        scored.run.pk
    }
    # Building the same set again queues nothing: the run has scored it.
    with django_capture_on_commit_callbacks(execute=True):
        contrast_set_build(study=cast.study, low=-1.0, high=1.0)
    assert queued(broker) == []


def test_a_pl_run_finished_after_a_contrast_set_exists_scores_it_as_its_last_step(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=12)
    judge = train(cast, epochs=30).judge
    assert judge is not None
    contrast_set = _contrast_set(cast.study)
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert not ContrastScoring.objects.exists()
    assert pl_run_execute(run_id=run.pk) == "done"
    row = ContrastScoring.objects.get()
    assert (row.run_id, row.contrast_set_id, row.status) == (
        run.pk,
        contrast_set.pk,
        ContrastScoring.Status.DONE,
    )
    assert score_consistency_read(study=cast.study, run_ids=[run.pk])[run.pk].plain().pairs == 4


def test_the_fingerprint_changes_when_a_scoring_is_stored(cast: Cast, reward_dirs: Path) -> None:
    scored = _trained_run(cast)
    contrast_set = _contrast_set(cast.study)
    before = study_data_fingerprint(study=cast.study)
    assert contrast_scoring_run(run_id=scored.run.pk, contrast_set_id=contrast_set.pk) == "done"
    stored = study_data_fingerprint(study=cast.study)
    assert stored != before
    assert study_data_fingerprint(study=cast.study) == stored
    # A scoring deleted (with its contrast set, say) changes it again.
    ContrastScoring.objects.all().delete()
    assert study_data_fingerprint(study=cast.study) != stored


def test_a_failed_scoring_records_its_reason_and_leaves_the_run_out_of_the_report(
    cast: Cast, reward_dirs: Path
) -> None:
    scored = _trained_run(cast)
    contrast_set = _contrast_set(cast.study)
    artifacts.artifact_remove(str(scored.judge.params["artifact"]))
    before = study_data_fingerprint(study=cast.study)

    assert contrast_scoring_run(run_id=scored.run.pk, contrast_set_id=contrast_set.pk) == "failed"
    row = ContrastScoring.objects.get()
    assert row.status == ContrastScoring.Status.FAILED
    assert row.error.startswith("ArtifactMissing: the model folder")
    assert row.finished_at is not None and row.lease_token == ""
    # Left out, as a missing artifact was before; a failure is no new data for the report.
    assert score_consistency_read(study=cast.study, run_ids=[scored.run.pk]) == {}
    assert study_data_fingerprint(study=cast.study) == before
    # The run's verdicts are untouched, and the next request tries again.
    scored.run.refresh_from_db()
    assert scored.run.status == JudgeRun.Status.DONE
    assert contrast_scoring_run(run_id=scored.run.pk, contrast_set_id=contrast_set.pk) == "failed"
    assert ContrastScoring.objects.get().attempts == 2


def _past(scored: Scored, contrast_set: ContrastSet, settings: LazySettings) -> None:
    """The run and the set older than the grace period a message has to reach a worker."""
    past = timezone.now() - timedelta(
        seconds=settings.CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS + 1
    )
    JudgeRun.objects.filter(pk=scored.run.pk).update(finished_at=past)
    ContrastSet.objects.filter(pk=contrast_set.pk).update(created_at=past)


def test_the_reconciler_sends_again_a_scoring_whose_message_was_lost_or_whose_worker_died(
    cast: Cast, reward_dirs: Path, broker: str, settings: LazySettings
) -> None:
    scored = _trained_run(cast)
    # Stored without the build's message: as if the broker had refused it.
    contrast_set = _contrast_set(cast.study)
    # Within the grace period the message may still be on its way: nothing is sent.
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []
    _past(scored, contrast_set, settings)
    assert pl_runs_reconcile() == 1
    assert queued(broker) == [(TASK_CONTRAST_SCORE, [scored.run.pk, contrast_set.pk])]
    # A worker takes the message and dies holding the row: nothing is sent while the lease
    # holds, the scoring once it has run out, and the message's worker stores it.
    assert contrast_scoring_claim(run_id=scored.run.pk, contrast_set_id=contrast_set.pk)
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []
    ContrastScoring.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert pl_runs_reconcile() == 1
    assert queued(broker) == [(TASK_CONTRAST_SCORE, [scored.run.pk, contrast_set.pk])]
    assert tasks.contrast_score(scored.run.pk, contrast_set.pk) == "done"
    assert ContrastScoring.objects.get().attempts == 2
    # Done: never sent again.
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []


def test_the_reconciler_leaves_a_failed_scoring_and_waits_for_a_busy_reward_queue(
    cast: Cast, reward_dirs: Path, broker: str, settings: LazySettings
) -> None:
    scored = _trained_run(cast)
    contrast_set = _contrast_set(cast.study)
    _past(scored, contrast_set, settings)
    # A message waits in the reward_model queue (a training, say): the lost scoring's own
    # message may be behind it, so nothing is sent.
    task_send("judges.pl_train", args=[0], queue=Queue.REWARD_MODEL)
    assert pl_runs_reconcile() == 0
    assert queued(broker) == [("judges.pl_train", [0])]
    # A failed scoring has its reason on the row: the reconciler does not try it again.
    artifacts.artifact_remove(str(scored.judge.params["artifact"]))
    assert contrast_scoring_run(run_id=scored.run.pk, contrast_set_id=contrast_set.pk) == "failed"
    assert pl_runs_reconcile() == 0
    assert queued(broker) == []


def test_the_scoring_lease_outlasts_the_tasks_hard_time_limit() -> None:
    assert tasks.contrast_score.time_limit < LEASE_SECONDS


def test_the_report_reads_the_scores_without_loading_the_model_code() -> None:
    """The report's read of the scores imports no torch or sentence-transformers module of its
    own (a fresh interpreter, as the analysis worker starts)."""
    code = (
        "import django, os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
        "'config.settings.test'); django.setup(); import leaderboard.selectors.contrast; "
        "bad = [m for m in ('torch', 'sentence_transformers', 'judges.reward.artifacts', "
        "'judges.reward.encoder') if m in sys.modules]; print(','.join(bad))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(Path(__file__).resolve().parents[3]),
    )
    assert found.stdout.strip() == ""
