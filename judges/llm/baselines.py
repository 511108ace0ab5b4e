"""Baseline judges for calibration: a seeded coin and a preference for the longer answer.

Both answer in the Likert format of the order shown, so their calls go through the same parser,
mapping and storage as an LLM's.
"""

from __future__ import annotations

import random


def random_reply(*, seed: int, pair_id: int, order: str) -> str:
    """A Likert reply drawn uniformly from 1-8, the same for the same (seed, pair, order)."""
    rng = random.Random(f"{seed}:{pair_id}:{order}")
    return f"{rng.randint(1, 8)}\nRandom baseline (seed {seed})."


def longer_reply(*, first: str, second: str) -> str:
    """A Likert reply preferring the longer answer (in characters); equal lengths are a tie."""
    if len(first) > len(second):
        score = 2
    elif len(second) > len(first):
        score = 7
    else:
        score = 4
    return f"{score}\nLength baseline: first {len(first)} characters, second {len(second)}."
