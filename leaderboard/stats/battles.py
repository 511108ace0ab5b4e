"""Pairwise battles: their checks and encoding, and the rating frame every rating method returns.

``battles`` is a DataFrame with columns ``model_a``, ``model_b`` and ``winner`` in {"model_a",
"model_b", "tie"}; a tie is half a win for each side (the first model's score ``S_a`` is 1, 0 or
1/2, as in A. Elo (1978), "The Rating of Chessplayers, Past and Present", and the LMSYS Chatbot
Arena notebook, Zheng et al. 2023). A battle of a model against itself carries no information
and is rejected (ValueError) rather than dropped silently. The ratings of
:mod:`leaderboard.stats.elo` and :mod:`leaderboard.stats.bradley_terry` come back as one frame:
columns model, rating, lower, upper, sorted by rating descending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd

RATING_COLUMNS = ["model", "rating", "lower", "upper"]
# The first model's score in a battle, by winner (a tie is half a win).
SCORE_A = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}
# The median and the ends of the 95% percentile interval of a bootstrap.
QUANTILES = (0.025, 0.5, 0.975)


@dataclass(frozen=True)
class EncodedBattles:
    """The battles as arrays: each model numbered by its place in ``models`` (sorted names),
    ``a`` and ``b`` the two models of each battle, ``score_a`` the first model's score."""

    models: list[str]
    a: npt.NDArray[np.intp]
    b: npt.NDArray[np.intp]
    score_a: npt.NDArray[np.float64]


def encode_battles(battles: pd.DataFrame) -> EncodedBattles:
    """Check the battles and number them: models by sorted name, winners as ``S_a``
    (:data:`SCORE_A`). Raises ValueError on a missing column, an unknown winner, a missing model
    or a battle of a model against itself."""
    import pandas as pd

    missing = {"model_a", "model_b", "winner"} - set(battles.columns)
    if missing:
        raise ValueError(f"battles lack the columns {sorted(missing)}")
    # Factorised once, then the few distinct values are checked and mapped, so that a million
    # battles cost array passes rather than a dictionary lookup per battle.
    winner_codes, winner_values = pd.factorize(battles["winner"])
    unknown = set(winner_values.tolist()) - set(SCORE_A)
    if (winner_codes < 0).any():
        unknown.add(None)
    if unknown:
        raise ValueError(
            f"winner must be model_a, model_b or tie; found {sorted(map(str, unknown))}"
        )
    # Factorised as they come (a Categorical by its codes), then the few distinct names are
    # turned into text; converting a million names to text first costs far more.
    codes_a, seen_a = pd.factorize(battles["model_a"])
    codes_b, seen_b = pd.factorize(battles["model_b"])
    if (codes_a < 0).any() or (codes_b < 0).any():
        raise ValueError("model_a and model_b must name a model in every battle")
    names_a = [str(m) for m in seen_a.tolist()]
    names_b = [str(m) for m in seen_b.tolist()]
    models = sorted(set(names_a) | set(names_b))
    # factorize numbers the names in order of appearance; map them to their sorted positions.
    position = {m: i for i, m in enumerate(models)}
    a = np.array([position[m] for m in names_a], dtype=np.intp)[codes_a]
    b = np.array([position[m] for m in names_b], dtype=np.intp)[codes_b]
    if (a == b).any():
        raise ValueError("a battle of a model against itself carries no information")
    scores = np.array([SCORE_A[w] for w in winner_values.tolist()], dtype=np.float64)
    return EncodedBattles(
        models=models,
        a=a,
        b=b,
        score_a=scores[winner_codes],
    )


def rating_frame(
    models: list[str],
    rating: npt.NDArray[np.float64],
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
) -> pd.DataFrame:
    """The ratings as a frame of :data:`RATING_COLUMNS`, by rating descending, then model name."""
    import pandas as pd

    frame = pd.DataFrame({"model": models, "rating": rating, "lower": lower, "upper": upper})
    frame = frame.sort_values(["rating", "model"], ascending=[False, True], kind="stable")
    return frame.reset_index(drop=True)[RATING_COLUMNS]


def empty_ratings() -> pd.DataFrame:
    """The frame of no ratings (no battles): :data:`RATING_COLUMNS`, typed, no rows."""
    import pandas as pd

    return pd.DataFrame(
        {c: pd.Series(dtype=object if c == "model" else float) for c in RATING_COLUMNS}
    )
