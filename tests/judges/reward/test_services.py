"""Training a PL model on a study, registering it as a judge, and scoring a run with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from django.conf import LazySettings
from django.core.exceptions import PermissionDenied, ValidationError

from annotation.models import Answer, ContrastSet, Pair, Prompt
from annotation.services.contrast import ContrastPairSpec, contrast_set_store
from annotation.services.pairs import pairs_generate
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun, PLTraining
from judges.reward import artifacts, pipeline, scoring
from judges.reward.calibration import likert_from_probability, probability_b
from judges.reward.data import question_text
from judges.reward.scoring import pl_run_execute
from judges.reward.services import (
    TrainingRequest,
    pl_training_cancel,
    pl_training_execute,
    pl_training_start,
)
from judges.services.runs import (
    judge_run_cancel,
    judge_run_create,
    judge_run_resume,
    judge_run_start,
)
from tests.conftest import Cast
from tests.judges.reward.conftest import ranked_study

FAST = {"epochs": 30, "hidden": 32, "batch_size": 8, "holdout": 0.25, "seed": 5}


def train(cast: Cast, name: str = "pl-test", **options: object) -> PLTraining:
    request = TrainingRequest(name=name, **{**FAST, **options})  # type: ignore[arg-type]
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert pl_training_execute(training_id=training.pk) in {"done", "failed", "cancelled"}
    training.refresh_from_db()
    return training


@pytest.mark.django_db
def test_a_model_trained_on_ranked_lists_becomes_an_order_invariant_pl_judge(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study)
    training = train(cast, recipe="listwise", k="all", sources=("ranked",))
    assert training.status == PLTraining.Status.DONE, training.error
    judge = training.judge
    assert judge is not None
    assert (judge.kind, judge.order_invariant, judge.name) == (Judge.Kind.PL, True, "pl-test")
    assert training.epoch == 30 and len(training.curve) == 30
    assert training.curve[-1]["train_loss"] < training.curve[0]["train_loss"]
    metadata = json.loads((reward_dirs / judge.params["artifact"] / "metadata.json").read_text())
    assert metadata["recipe"] == "listwise" and metadata["k"] == "all"
    assert metadata["seed"] == 5
    assert len(metadata["training_data_hash"]) == 64 and len(metadata["backbone_hash"]) == 64
    assert metadata["versions"]["torch"].startswith("2.13.0")
    assert len(metadata["curve"]) == 30
    held = training.metrics["held_out"]
    assert held["lists"] == 4
    assert held["first_vs_last"] == 1.0
    assert held["ndcg@3"] > 0.9


@pytest.mark.django_db
def test_the_same_data_and_seed_give_identical_weights_and_scores(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=8)
    one = train(cast, "pl-one", recipe="pairwise", k="3", epochs=5)
    two = train(cast, "pl-two", recipe="pairwise", k="3", epochs=5)
    other = train(cast, "pl-three", recipe="pairwise", k="3", epochs=5, seed=6)
    hashes = [artifacts.artifact_metadata(t.artifact)["weights_hash"] for t in (one, two, other)]
    assert hashes[0] == hashes[1] != hashes[2]
    assert one.data_hash == two.data_hash
    texts = (["How do I plan a road trip?"], ["Pick a route and book stops early."])
    assert artifacts.artifact_load(one.artifact).score(*texts) == pytest.approx(
        artifacts.artifact_load(two.artifact).score(*texts), abs=0
    )


@pytest.mark.django_db
def test_human_labels_train_a_model_that_beats_chance_on_held_out_judgments(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, with_ranks=False, human=True)
    training = train(cast, k="2", sources=("human",), ties="half", likert_weights=True)
    assert training.status == PLTraining.Status.DONE, training.error
    assert training.data_summary["lists"] == 0
    assert training.data_summary["pairs"] == 16 * 6
    assert training.metrics["held_out"]["pair_accuracy"] > 0.8


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("setup", "options", "field", "message"),
    [
        ("empty", {}, "data", "no ranked lists .* and no human judgments"),
        ("tied", {"sources": ("ranked",)}, "data", "prompt 'q0': answers .* share rank 1"),
        ("ranked", {"k": "5", "sources": ("ranked",)}, "data", "K=5 is larger than every"),
        ("ranked", {"mode": "hf", "checkpoint": "/nowhere/ckpt"}, "checkpoint", "not a checkpoint"),
        ("ranked", {"k": "3", "sources": ("human",)}, "k", "human labels are pairs"),
        ("ranked", {"recipe": "lambdarank"}, "recipe", "unknown recipe"),
    ],
)
def test_bad_input_is_named_before_anything_is_queued(
    cast: Cast, reward_dirs: Path, setup: str, options: dict[str, object], field: str, message: str
) -> None:
    if setup != "empty":
        ranked_study(cast.study, prompts=2)
    if setup == "tied":
        Answer.objects.filter(prompt__external_id="q0", rank=2).update(rank=1)
    request = TrainingRequest(name="bad", **options)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as caught:
        pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert field in caught.value.message_dict
    assert caught.match(message)
    assert not PLTraining.objects.exists()


@pytest.mark.django_db
def test_an_annotator_or_outsider_may_not_train(cast: Cast, reward_dirs: Path) -> None:
    ranked_study(cast.study, prompts=2)
    with pytest.raises(PermissionDenied):
        pl_training_start(study=cast.study, user=cast.outsider, request=TrainingRequest(name="x"))


@pytest.mark.django_db
def test_a_training_cancelled_mid_way_registers_nothing(
    cast: Cast, reward_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranked_study(cast.study, prompts=4)
    real = pipeline.train

    def cancel_then_train(**kwargs: object) -> object:
        pl_training_cancel(training=PLTraining.objects.get(), user=cast.researcher)
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "train", cancel_then_train)
    training = train(cast)
    assert training.status == PLTraining.Status.CANCELLED
    assert training.epoch == 0
    assert not Judge.objects.filter(kind=Judge.Kind.PL).exists()
    assert not reward_dirs.exists() or not any(reward_dirs.iterdir())


def test_the_likert_rule_bins_the_probability_into_eight_equal_parts() -> None:
    assert [likert_from_probability(p) for p in (0.0, 0.124, 0.125, 0.49, 0.5, 0.62)] == [
        1,
        1,
        2,
        4,
        5,
        5,
    ]
    assert [likert_from_probability(p) for p in (0.625, 0.874, 0.875, 1.0)] == [6, 7, 8, 8]
    assert probability_b(0.0, 0.0) == 0.5
    assert probability_b(-800.0, 800.0) == 1.0
    assert probability_b(1.0, 0.0) == pytest.approx(1 / (1 + np.e))


@pytest.mark.django_db
def test_a_pl_run_scores_each_answer_once_and_derives_one_call_per_pair(
    cast: Cast, reward_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = ranked_study(cast.study, prompts=6)
    judge = train(cast, epochs=10).judge
    assert judge is not None
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert run.status == JudgeRun.Status.PENDING
    assert pl_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE
    assert AnswerScore.objects.filter(run=run).count() == 24
    calls = list(JudgeCall.objects.filter(run=run).select_related("pair"))
    assert len(calls) == len(pairs) == 36
    scores = dict(AnswerScore.objects.filter(run=run).values_list("answer_id", "score"))
    # The verdicts read the probability through the temperature fitted on the held-out pairs.
    metadata = artifacts.artifact_metadata(judge.params["artifact"])
    temperature = metadata["temperature"]
    assert temperature > 0 and temperature != 1.0
    assert metadata["metrics"]["calibration"]["temperature"] == temperature
    training = PLTraining.objects.get(judge=judge)
    assert training.metrics["calibration"]["temperature"] == temperature
    for call in calls:
        assert call.order == JudgeCall.Order.A_FIRST and call.status == JudgeCall.Status.DONE
        assert call.request["temperature"] == temperature
        pair = call.pair
        assert pair is not None
        p = probability_b(scores[pair.answer_a_id], scores[pair.answer_b_id], temperature)
        assert call.likert == call.likert_shown == likert_from_probability(p)
        assert (call.score_a, call.score_b) == (scores[pair.answer_a_id], scores[pair.answer_b_id])
    # A later run of the same model reuses the scores: the model is not even loaded.
    monkeypatch.setattr(artifacts, "artifact_load", _must_not_load)
    subset = Pair.objects.filter(prompt__external_id="q0")
    again = judge_run_create(judge=judge, study=cast.study, user=cast.researcher, pairs=subset)
    assert pl_run_execute(run_id=again.pk) == "done"
    assert JudgeCall.objects.filter(run=again).count() == 6
    assert AnswerScore.objects.filter(run=again).count() == 4


@pytest.mark.django_db
def test_a_pl_run_scores_both_answers_of_a_contrast_item_under_the_item_prompt(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, prompts=4)
    judge = train(cast, epochs=10).judge
    assert judge is not None
    first, second = Prompt.objects.filter(study=cast.study).order_by("pk")[:2]
    best_first, best_second = (prompt.answers.get(rank=1) for prompt in (first, second))
    contrast_set_store(
        study=cast.study,
        seed=0,
        low=0.75,
        high=0.9,
        best=ContrastSet.Best.FIRST_RANKED,
        system=None,
        backbone="test",
        pairs=[ContrastPairSpec(first.pk, second.pk, best_first.pk, best_second.pk, 0.8)],
    )
    pairs_generate(study=cast.study, strategy="contrast")
    items = list(Pair.objects.filter(study=cast.study, contrast__isnull=False))
    assert len(items) == 2
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    assert pl_run_execute(run_id=run.pk) == "done"
    model = artifacts.artifact_load(judge.params["artifact"])
    own = dict(AnswerScore.objects.filter(run=run).values_list("answer_id", "score"))
    for item in items:
        call = JudgeCall.objects.get(run=run, pair=item)
        question = question_text(item.prompt.turns)
        texts = [item.answer_a.turns[0], item.answer_b.turns[0]]
        h_a, h_b = (float(v) for v in model.score([question, question], texts))
        assert (call.score_a, call.score_b) == pytest.approx((h_a, h_b))
        temperature = artifacts.artifact_metadata(judge.params["artifact"])["temperature"]
        assert call.likert == likert_from_probability(probability_b(h_a, h_b, temperature))
        # The answer of the other prompt is scored under this item's prompt, not its own.
        other = item.answer_b if item.answer_a.prompt_id == item.prompt_id else item.answer_a
        under_item = h_b if other == item.answer_b else h_a
        assert under_item != pytest.approx(own[other.pk])
    # The stored scores stay each answer's score under its own prompt.
    assert AnswerScore.objects.filter(run=run).count() == 16


def _must_not_load(name: str) -> None:
    raise AssertionError(f"model {name} loaded although every answer was scored")


@pytest.mark.django_db
def test_a_cancelled_pl_run_resumes_from_the_answers_already_scored(
    cast: Cast, reward_dirs: Path, monkeypatch: pytest.MonkeyPatch, settings: LazySettings
) -> None:
    ranked_study(cast.study, prompts=3)
    judge = train(cast, epochs=3).judge
    assert judge is not None
    run = judge_run_start(judge=judge, study=cast.study, user=cast.researcher)
    settings.CONCORD_REWARD_SCORE_BATCH = 4
    real = scoring._still_mine
    batches: list[int] = []

    def cancel_after_first_batch(run_id: int, token: str) -> None:
        batches.append(run_id)
        if len(batches) == 2:
            judge_run_cancel(run=run, user=cast.researcher)
        real(run_id, token)

    monkeypatch.setattr(scoring, "_still_mine", cancel_after_first_batch)
    assert pl_run_execute(run_id=run.pk) == "cancelled"
    assert AnswerScore.objects.filter(run=run).count() == 4
    assert not JudgeCall.objects.filter(run=run).exists()
    monkeypatch.setattr(scoring, "_still_mine", real)
    resumed = judge_run_resume(run=run, user=cast.researcher)
    assert resumed.status == JudgeRun.Status.PENDING
    assert pl_run_execute(run_id=run.pk) == "done"
    assert AnswerScore.objects.filter(run=run).count() == 12
    assert JudgeCall.objects.filter(run=run).count() == 18
