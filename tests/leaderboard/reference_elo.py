"""The plain per-battle reference of the Elo bootstrap that ``leaderboard.stats.elo`` runs.

Written for reading, not speed: Python integers for the random words, Python ``sorted`` for the
canonical numbering, a dictionary of ratings and the LMSYS notebook's update one battle at a
time. It replays exactly the draws that ``elo_bootstrap`` documents (battles with replacement, or
whole prompts with replacement in a shuffled order), so the compiled kernel must give the same
ratings up to floating-point rounding. The tests compare the two; ``benchmarks/bench_elo.py``
times the kernel against this loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

MASK = 2**64 - 1
GAMMA = 0x9E3779B97F4A7C15
SCORE_A = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}
# The canonical order of outcomes within a pair of models: model_b won, tie, model_a won.
OUTCOME_RANK = {"model_b": 0, "tie": 1, "model_a": 2}


def mix13(z: int) -> int:
    """Stafford's Mix13 finaliser of SplitMix64, on Python integers modulo 2**64."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def draw_key(seed: int) -> int:
    """The draws' key: the first 64-bit word of numpy's ``SeedSequence(seed)`` state."""
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])


def word(key: int, counter: int) -> int:
    """Word ``counter`` of the SplitMix64 sequence keyed by ``key``."""
    return mix13((key + (counter + 1) * GAMMA) & MASK)


def below(u: int, bound: int) -> int:
    """A random word mapped onto ``0 .. bound - 1`` by ``floor(u bound / 2**64)``."""
    return (u * bound) >> 64


def canonical_order(battles: pd.DataFrame, clusters: Sequence[Hashable] | None = None) -> list[int]:
    """Row positions sorted by (prompt id,) model a, model b, outcome; stable."""
    rows = list(battles[["model_a", "model_b", "winner"]].itertuples(index=False))

    def sort_key(i: int) -> tuple[object, ...]:
        a, b, winner = rows[i]
        kind = (str(a), str(b), OUTCOME_RANK[str(winner)])
        return kind if clusters is None else (clusters[i], *kind)

    return sorted(range(len(rows)), key=sort_key)


def vote_rounds(n: int, rounds: int, seed: int) -> list[list[int]]:
    """Per round, the n canonical positions drawn with replacement, in the order drawn."""
    key = draw_key(seed)
    return [[below(word(key, r * n + t), n) for t in range(n)] for r in range(rounds)]


def prompt_rounds(prompt_sizes: Sequence[int], rounds: int, seed: int) -> list[list[int]]:
    """Per round, the canonical positions of the battles of C prompts drawn with replacement,
    shuffled by the inside-out Fisher-Yates shuffle on the round's later words."""
    key = draw_key(seed)
    starts = [sum(prompt_sizes[:p]) for p in range(len(prompt_sizes))]
    count = len(prompt_sizes)
    out = []
    for r in range(rounds):
        base = r * 2**40
        drawn = [below(word(key, base + c), count) for c in range(count)]
        listed = [starts[p] + i for p in drawn for i in range(prompt_sizes[p])]
        shuffled: list[int] = []
        for t, battle in enumerate(listed):
            j = below(word(key, base + count + t), t + 1)
            shuffled.append(battle)
            shuffled[t], shuffled[j] = shuffled[j], battle
        out.append(shuffled)
    return out


def online_elo(
    rows: Sequence[tuple[str, str, str]],
    sequence: Sequence[int],
    *,
    k: float = 4.0,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
) -> dict[str, float]:
    """The LMSYS notebook's compute_online_elo over ``rows[i] for i in sequence``."""
    rating: dict[str, float] = {}
    for i in sequence:
        model_a, model_b, winner = rows[i]
        ra, rb = rating.get(model_a, init), rating.get(model_b, init)
        ea = 1 / (1 + base ** ((rb - ra) / scale))
        delta = k * (SCORE_A[winner] - ea)
        rating[model_a] = ra + delta
        rating[model_b] = rb - delta
    return rating


def elo_bootstrap_reference(
    battles: pd.DataFrame,
    *,
    rounds: int,
    seed: int,
    k: float = 4.0,
    clusters: Sequence[Hashable] | None = None,
    drop_ties: bool = False,
) -> pd.DataFrame:
    """The bootstrap medians and 2.5 / 97.5 percentiles, columns as ``elo_bootstrap``'s. With
    ``drop_ties``, each round's sequence is played less its ties (the second board of
    ``elo_bootstrap_ties_kept_and_dropped``), over the models that have a battle other than a
    tie."""
    order = canonical_order(battles, clusters)
    table = battles[["model_a", "model_b", "winner"]].astype(str)
    rows = [tuple(table.iloc[i]) for i in order]
    if clusters is None:
        sequences = vote_rounds(len(rows), rounds, seed)
    else:
        ordered = [clusters[i] for i in order]
        sizes = [len(list(group)) for _, group in itertools.groupby(ordered)]
        sequences = prompt_rounds(sizes, rounds, seed)
    decisive = table[table["winner"] != "tie"] if drop_ties else table
    models = sorted(set(decisive["model_a"]) | set(decisive["model_b"]))
    per_round = []
    for sequence in sequences:
        if drop_ties:
            sequence = [i for i in sequence if rows[i][2] != "tie"]
        rating = online_elo(rows, sequence, k=k)
        per_round.append([rating.get(m, np.nan) for m in models])
    lower, median, upper = np.nanquantile(np.array(per_round), [0.025, 0.5, 0.975], axis=0)
    frame = pd.DataFrame({"model": models, "rating": median, "lower": lower, "upper": upper})
    return frame.sort_values(["rating", "model"], ascending=[False, True]).reset_index(drop=True)
