"""The small head that scores an answer from frozen question and answer embeddings.

Features of a (question q, answer a) pair of unit embeddings: ``[q, a, q*a, |q-a|]`` (the
sentence-pair features of Conneau et al. 2017, InferSent, and of Sentence-BERT), 4d numbers for
a d-dimensional encoder. The head is a two-layer perceptron, 4d -> hidden -> 1, whose output is
the helpfulness score h(q, a).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

FEATURES = "[q, a, q*a, |q-a|]"


def pair_features(questions: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """Row-wise ``[q, a, q*a, |q-a|]`` of question and answer embeddings, float32 [n, 4d]."""
    if questions.shape != answers.shape:
        raise ValueError(
            f"question and answer embeddings differ: {questions.shape} vs {answers.shape}"
        )
    return np.concatenate(
        [questions, answers, questions * answers, np.abs(questions - answers)], axis=1
    ).astype(np.float32, copy=False)


class Head(torch.nn.Module):
    """h(q, a) from the pair features: Linear(4d, hidden), GELU, Linear(hidden, 1)."""

    def __init__(self, in_features: int, hidden: int) -> None:
        super().__init__()
        self.in_features = in_features
        self.hidden = hidden
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(in_features, hidden),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, 1),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features).squeeze(-1)


def head_new(*, in_features: int, hidden: int, seed: int) -> Head:
    """A freshly initialised head; the same seed gives the same initial weights."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return Head(in_features, hidden)
    finally:
        torch.random.set_rng_state(generator_state)


def head_scorer(head: Head, features: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The scorer the training loop calls: answer indices -> the head's scores of their rows."""

    def score(indices: torch.Tensor) -> torch.Tensor:
        return head(features[indices])

    return score


def head_scores(head: Head, features: np.ndarray, *, batch_size: int = 4096) -> np.ndarray:
    """Scores of every row of `features` (float64), in batches, without gradients."""
    head.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(features), batch_size):
            chunk = torch.from_numpy(np.ascontiguousarray(features[start : start + batch_size]))
            out.append(head(chunk).double().numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float64)
