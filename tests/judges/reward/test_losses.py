"""The PL loss against hand computation, and AdvisorQA's pairwise decomposition."""

from __future__ import annotations

import math
import random

import pytest
import torch

from judges.reward.losses import (
    advisorqa_pairs,
    bt_pair_loss,
    pl_batch_loss,
    pl_list_loss,
    recipe_name,
)


def test_pl_loss_of_three_answers_equals_the_hand_computed_value() -> None:
    # Scores 2, 1, 0 in the observed order: P = e^2/(e^2+e+1) * e/(e+1) * 1.
    expected = -math.log(math.exp(2) / (math.exp(2) + math.e + 1) * math.e / (math.e + 1))
    loss = pl_list_loss(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64))
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.7209, abs=1e-4)


def test_pl_loss_of_two_answers_is_the_bradley_terry_loss() -> None:
    h = torch.tensor([[0.3, 1.7], [-2.0, 0.5]], dtype=torch.float64)
    mask = torch.ones_like(h, dtype=torch.bool)
    bt = bt_pair_loss(h[:, 0], h[:, 1])
    assert pl_batch_loss(h, mask).item() == pytest.approx(bt.item(), rel=1e-12)
    assert bt.item() == pytest.approx(
        (-math.log(1 / (1 + math.exp(1.4))) - math.log(1 / (1 + math.exp(2.5)))) / 2, rel=1e-12
    )


def test_padding_does_not_change_a_lists_loss() -> None:
    lists = [[1.0, 0.5, -0.2, 0.0], [0.1, 0.9, 0.0, 0.0]]
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    batch = pl_batch_loss(torch.tensor(lists, dtype=torch.float64), mask)
    one = pl_list_loss(torch.tensor(lists[0], dtype=torch.float64))
    two = pl_list_loss(torch.tensor(lists[1][:2], dtype=torch.float64))
    assert batch.item() == pytest.approx((one.item() + two.item()) / 2, rel=1e-12)


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (2, {(0, 1)}),
        (3, {(0, 1), (0, 2), (1, 2)}),
        (4, {(0, 1), (0, 2), (1, 2), (0, 6), (1, 6), (2, 6)}),
        (
            5,
            {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (0, 6), (1, 6), (2, 6), (3, 6)},
        ),
    ],
)
def test_advisorqa_decomposition_gives_exactly_the_papers_pairs(
    k: int, expected: set[tuple[int, int]]
) -> None:
    pairs = advisorqa_pairs(7, k, rng=random.Random(1))
    assert len(pairs) == len(expected) == {2: 1, 3: 3, 4: 6, 5: 10}[k]
    assert set(pairs) == expected


def test_advisorqa_pairs_are_shuffled_by_the_seed() -> None:
    orders = {tuple(advisorqa_pairs(7, 5, rng=random.Random(seed))) for seed in range(5)}
    assert len(orders) > 1
    assert advisorqa_pairs(7, 5, rng=random.Random(3)) == advisorqa_pairs(
        7, 5, rng=random.Random(3)
    )


def test_a_list_shorter_than_k_gives_no_pairs() -> None:
    with pytest.raises(ValueError, match="a list of 3 answers cannot give PL\\(4\\)"):
        advisorqa_pairs(3, 4, rng=random.Random(0))
    assert len(advisorqa_pairs(4, None, rng=random.Random(0))) == 6


@pytest.mark.parametrize(
    ("recipe", "k", "name"),
    [
        ("listwise", "4", "PL listwise, top 4"),
        ("listwise", "all", "PL listwise, all answers"),
        ("listwise", None, "PL listwise, all answers"),
        ("pairwise", "2", "PL pairwise, top 2"),
        ("pairwise", "3", "PL pairwise, top 3"),
        ("pairwise", "4", "PL pairwise, top 3 + last"),
        ("pairwise", 5, "PL pairwise, top 4 + last"),
        ("pairwise", "all", "PL pairwise, every pair"),
    ],
)
def test_the_two_pl4_recipes_have_names_that_say_which_answers_count(
    recipe: str, k: str | int | None, name: str
) -> None:
    assert recipe_name(recipe, k) == name


def test_the_pairwise_name_lists_the_positions_advisorqa_pairs_takes() -> None:
    # "top 3 + last" of a 6-answer list: positions 0, 1, 2 and 5.
    taken = {i for pair in advisorqa_pairs(6, 4, rng=random.Random(0)) for i in pair}
    assert taken == {0, 1, 2, 5}
    assert recipe_name("pairwise", 4) == "PL pairwise, top 3 + last"
