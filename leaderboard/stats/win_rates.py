"""Win rates: the share of battles each model won against each other model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd


def win_rates_from_votes(frame: pd.DataFrame) -> tuple[list[str], npt.NDArray[np.float64], int]:
    """Models, win-rate matrix and battle count of one source's votes.

    ``frame`` has one row per vote (a battle) with ``system_a``, ``system_b`` and ``label``
    ("A": system_a won, "B": system_b won, anything else a tie). Formula: ``rates[i, j] =
    W_ij / (W_ij + W_ji)``, with ``W_ij`` the wins of model i over model j and a tie half a win
    to each side (the score a tie has in Elo), so ``rates[i, j] + rates[j, i] = 1``; NaN where
    two models never met and on the diagonal. Source: the pairwise win fraction of LMSYS's
    Chatbot Arena analysis ("Chatbot Arena: Benchmarking LLMs in the Wild with Elo Ratings",
    2023, its "fraction of model A wins" matrix), which leaves ties out where this counts them
    as half. Models are sorted by name;
    votes of a model against itself are left out of the rates and of the count. Summed from the
    counts per (model A, model B, label), so a million votes cost one group-by rather than a
    Python step per battle.
    """
    kept = frame[frame["system_a"] != frame["system_b"]]
    counts = kept.groupby(["system_a", "system_b", "label"], observed=True).size()
    keys = counts.index
    models = sorted({str(m) for level in (0, 1) for m in keys.get_level_values(level)})
    index = {m: i for i, m in enumerate(models)}
    wins = np.zeros((len(models), len(models)))
    levels = (keys.get_level_values(level) for level in range(3))
    for a, b, label, n in zip(*levels, counts.tolist(), strict=True):
        i, j = index[str(a)], index[str(b)]
        if label == "A":
            wins[i, j] += n
        elif label == "B":
            wins[j, i] += n
        else:
            wins[i, j] += n / 2
            wins[j, i] += n / 2
    games = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(games > 0, wins / games, np.nan)
    return models, rates, len(kept)
