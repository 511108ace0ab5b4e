"""The people's majority label of each unit.

Used by the kappas against the majority, the rationale section's judge disagreements, the gold
order's majority accuracy and the drill-down. Majority rule as in MT-Bench's majority-level
agreement (Zheng et al. 2023, section 4.2): the unique most common label of a unit's votes; when
two or three labels share the highest count the unit's majority is a tie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from leaderboard.stats.likert import PREFERENCES

if TYPE_CHECKING:
    import pandas as pd

# The canonical labels, in code order (the one definition, with the Likert conventions); the
# name the majority's readers import.
LABELS = PREFERENCES


def people_majority(
    votes: pd.DataFrame, *, key: str = "pair_id", label: str = "label"
) -> pd.Series:
    """Each unit's majority label: the unique most common of A, B, tie; a tied count is a tie.

    ``votes`` has one row per vote with a unit ``key`` (an integer) and a ``label`` (A, B or tie;
    any other value is left out). The result is indexed by the unit key, sorted; units whose votes
    all lack a label get "tie" (no label is more common than another). Counted from label codes
    per unit (``bincount`` over ``unit * 3 + label``), not by a group-by.
    """
    import pandas as pd

    if votes.empty:
        return pd.Series(dtype=object)
    codes = pd.Categorical(votes[label], categories=LABELS).codes.astype(np.int64)
    unit_codes, units = pd.factorize(votes[key], sort=True)
    known = codes >= 0
    counts = np.bincount(unit_codes[known] * 3 + codes[known], minlength=3 * len(units)).reshape(
        len(units), 3
    )
    top = counts.max(axis=1, keepdims=True)
    unique = (counts == top).sum(axis=1) == 1
    labels = np.where(unique, np.array(LABELS, dtype=object)[counts.argmax(axis=1)], "tie")
    return pd.Series(labels, index=pd.Index(units, name=key), dtype=object)
