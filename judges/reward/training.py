"""The training loop shared by every backbone: examples, recipes and the PL / BT objectives.

It knows nothing of Django. A model is trained through a *scorer*: a function from answer
indices to scores (a tensor), so the same loop trains the head on cached embeddings and a whole
Hugging Face sequence-classification model. Training is deterministic: the same examples,
settings and seed give the same weights (the head's initial weights, the shuffling and the
batches all come from the seed).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from judges.reward.losses import LISTWISE, PAIRWISE, advisorqa_pairs, bt_pair_loss, pl_batch_loss

Scorer = Callable[[torch.Tensor], torch.Tensor]
# Called after each epoch with (epoch, train loss, validation loss); return False to stop.
EpochHook = Callable[[int, float, float | None], bool]


@dataclass(frozen=True)
class Examples:
    """Training examples over answer indices: ranked lists (best first) and weighted pairs.

    A pair is (better, worse, weight); a tie counted as half a win is two pairs of weight 0.5.
    """

    lists: tuple[tuple[int, ...], ...] = ()
    pairs: tuple[tuple[int, int, float], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.lists and not self.pairs


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters of one training run; all of them are written into the artifact."""

    recipe: str = LISTWISE
    k: int | None = None
    epochs: int = 40
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 64
    hidden: int = 256
    seed: int = 0


@dataclass
class TrainOutcome:
    """What the loop produced: the loss per epoch, and whether it was stopped early."""

    curve: list[dict[str, float | None]] = field(default_factory=list)
    stopped: bool = False


@dataclass(frozen=True)
class _Item:
    kind: str  # "list" or "pair"
    indices: tuple[int, ...]
    weight: float = 1.0


def recipe_items(examples: Examples, settings: TrainSettings, rng: random.Random) -> list[_Item]:
    """The loss terms of a recipe: top-K lists (listwise) or AdvisorQA's pairs (pairwise).

    Human pairs are Bradley-Terry terms under both recipes (a pair is a list of two). Lists
    shorter than K must have been left out by the caller.
    """
    items: list[_Item] = []
    for ranked in examples.lists:
        if settings.recipe == LISTWISE:
            top = ranked if settings.k is None else ranked[: settings.k]
            items.append(_Item("list", tuple(top)))
        elif settings.recipe == PAIRWISE:
            for better, worse in advisorqa_pairs(len(ranked), settings.k, rng=rng):
                items.append(_Item("pair", (ranked[better], ranked[worse])))
        else:
            raise ValueError(f"unknown recipe {settings.recipe!r}; one of listwise, pairwise")
    items.extend(_Item("pair", (b, w), weight) for b, w, weight in examples.pairs)
    return items


def _batch_loss(items: Sequence[_Item], scorer: Scorer, device: torch.device) -> torch.Tensor:
    """Sum of the batch's list and weighted pair losses over (lists + pair weights)."""
    needed = sorted({index for item in items for index in item.indices})
    position = {index: i for i, index in enumerate(needed)}
    scores = scorer(torch.tensor(needed, dtype=torch.long, device=device)).float()
    total = scores.new_zeros(())
    denominator = 0.0
    lists = [item for item in items if item.kind == "list"]
    pairs = [item for item in items if item.kind == "pair"]
    if lists:
        width = max(len(item.indices) for item in lists)
        index = np.zeros((len(lists), width), dtype=np.int64)
        mask = np.zeros((len(lists), width), dtype=bool)
        for row, item in enumerate(lists):
            index[row, : len(item.indices)] = [position[i] for i in item.indices]
            mask[row, : len(item.indices)] = True
        gathered = scores[torch.from_numpy(index).to(device)]
        total = total + pl_batch_loss(gathered, torch.from_numpy(mask).to(device)) * len(lists)
        denominator += len(lists)
    if pairs:
        ends = np.array([[position[p.indices[0]], position[p.indices[1]]] for p in pairs])
        ends_t = torch.from_numpy(ends).to(device)
        weights = torch.tensor([p.weight for p in pairs], dtype=scores.dtype, device=device)
        total = total + bt_pair_loss(scores[ends_t[:, 0]], scores[ends_t[:, 1]], weights) * (
            weights.sum()
        )
        denominator += float(weights.sum())
    return total / max(denominator, 1e-12)


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with `count` intra-op threads (None: leave torch's setting).

    The head's matrices are small: one thread beats several, which spin against each other and
    against other processes on a shared machine.
    """
    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _chunks(items: list[_Item], size: int) -> list[list[_Item]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def evaluate_loss(
    items: Sequence[_Item], scorer: Scorer, *, batch_size: int, device: torch.device
) -> float | None:
    """The mean loss over items without gradients, or None when there are none."""
    if not items:
        return None
    total, weight = 0.0, 0.0
    with torch.no_grad():
        for chunk in _chunks(list(items), batch_size):
            share = sum(1.0 if item.kind == "list" else item.weight for item in chunk)
            total += float(_batch_loss(chunk, scorer, device)) * share
            weight += share
    return total / weight if weight else None


def train(
    *,
    model: torch.nn.Module,
    scorer: Scorer,
    train_examples: Examples,
    validation: Examples,
    settings: TrainSettings,
    device: torch.device,
    on_epoch: EpochHook | None = None,
    autocast: bool = False,
) -> TrainOutcome:
    """Train `model` (through `scorer`) with AdamW; record train and validation loss per epoch.

    `autocast` runs the forward pass in bfloat16 mixed precision (used on a CUDA device).
    """
    rng = random.Random(settings.seed)
    items = recipe_items(train_examples, settings, rng)
    if not items:
        raise ValueError("no training examples")
    val_items = recipe_items(validation, settings, random.Random(settings.seed + 1))
    optimiser = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=settings.learning_rate,
        weight_decay=settings.weight_decay,
    )
    outcome = TrainOutcome()
    for epoch in range(1, settings.epochs + 1):
        model.train()
        order = list(items)
        rng.shuffle(order)
        total, share_sum = 0.0, 0.0
        for chunk in _chunks(order, settings.batch_size):
            optimiser.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = _batch_loss(chunk, scorer, device)
            loss.backward()
            optimiser.step()
            share = sum(1.0 if item.kind == "list" else item.weight for item in chunk)
            total += float(loss.detach()) * share
            share_sum += share
        model.eval()
        train_loss = total / share_sum
        val_loss = evaluate_loss(val_items, scorer, batch_size=settings.batch_size, device=device)
        if not math.isfinite(train_loss):
            raise FloatingPointError(f"the training loss became {train_loss} in epoch {epoch}")
        outcome.curve.append({"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss})
        if on_epoch is not None and not on_epoch(epoch, train_loss, val_loss):
            outcome.stopped = True
            break
    return outcome
