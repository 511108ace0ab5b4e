"""The training loop on synthetic lists whose order a known feature drives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from judges.reward.features import head_new, head_scorer, head_scores
from judges.reward.losses import LISTWISE, PAIRWISE
from judges.reward.training import Examples, TrainSettings, torch_threads, train
from rankeval.listwise import listwise_scores, random_scores

PROMPTS, ANSWERS, DIM = 150, 5, 12


def synthetic(seed: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Answers of random features; each prompt's answers ranked by a hidden linear score."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(PROMPTS * ANSWERS, DIM)).astype(np.float32)
    truth = features @ rng.normal(size=DIM)
    lists = []
    for prompt in range(PROMPTS):
        members = np.arange(prompt * ANSWERS, (prompt + 1) * ANSWERS)
        lists.append(tuple(int(i) for i in members[np.argsort(-truth[members])]))
    return features, lists


def fit(
    recipe: str, k: int | None, seed: int = 3, epochs: int = 25
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    features, lists = synthetic(0)
    head = head_new(in_features=DIM, hidden=16, seed=seed)
    batch = 16 if recipe == LISTWISE else 64
    settings = TrainSettings(recipe=recipe, k=k, epochs=epochs, batch_size=batch, seed=seed)
    with torch_threads(1):
        outcome = train(
            model=head,
            scorer=head_scorer(head, torch.from_numpy(features)),
            train_examples=Examples(lists=tuple(lists[:120])),
            validation=Examples(lists=tuple(lists[120:])),
            settings=settings,
            device=torch.device("cpu"),
        )
    assert len(outcome.curve) == epochs
    assert outcome.curve[-1]["val_loss"] < outcome.curve[0]["val_loss"]  # type: ignore[operator]
    return head_scores(head, features), lists[120:]


@pytest.mark.parametrize(("recipe", "k"), [(LISTWISE, None), (LISTWISE, 2), (PAIRWISE, 5)])
def test_training_recovers_the_order_on_held_out_prompts(recipe: str, k: int | None) -> None:
    scores, held_out = fit(recipe, k)
    model = listwise_scores([scores[list(ranked)] for ranked in held_out])
    chance = listwise_scores(random_scores([ANSWERS] * len(held_out), seed=1))
    assert model.ndcg[5] > chance.ndcg[5] + 0.05
    assert model.first_vs_last > 0.85
    assert model.first_vs_second > chance.first_vs_second


def test_the_same_data_and_seed_give_identical_weights_and_scores() -> None:
    first, _ = fit(LISTWISE, 3, seed=11, epochs=5)
    second, _ = fit(LISTWISE, 3, seed=11, epochs=5)
    other, _ = fit(LISTWISE, 3, seed=12, epochs=5)
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


def test_human_pairs_with_weights_train_like_bradley_terry() -> None:
    features, lists = synthetic(0)
    pairs = tuple((ranked[0], ranked[-1], 1.0) for ranked in lists[:120]) + tuple(
        (ranked[1], ranked[3], 0.5) for ranked in lists[:120]
    )
    head = head_new(in_features=DIM, hidden=16, seed=0)
    with torch_threads(1):
        train(
            model=head,
            scorer=head_scorer(head, torch.from_numpy(features)),
            train_examples=Examples(pairs=pairs),
            validation=Examples(),
            settings=TrainSettings(recipe=LISTWISE, k=2, epochs=15, batch_size=32),
            device=torch.device("cpu"),
        )
    scores = head_scores(head, features)
    assert listwise_scores([scores[list(r)] for r in lists[120:]]).first_vs_last > 0.85
