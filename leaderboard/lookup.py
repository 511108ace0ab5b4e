"""Pure lookups in sorted ids and sorted frames, shared by the reads and the report sections.

No database and no statistics: numpy and pandas only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd


def positions_of(
    ids: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64], what: str
) -> npt.NDArray[np.intp]:
    """Each wanted id's position in the sorted `ids`; an id not there (a row pointing outside
    the study) raises ValueError naming it."""
    at = np.minimum(np.searchsorted(ids, wanted), max(len(ids) - 1, 0))
    missing = ids[at] != wanted if len(ids) else np.ones(len(wanted), dtype=bool)
    if missing.any():
        raise ValueError(f"{what} {int(wanted[missing][0])} is not one of the study's {what}s")
    return at


def rows_of_run(frame: pd.DataFrame, run_id: int) -> pd.DataFrame:
    """The rows of one judge run: a slice when the frame is sorted by run (the votes' judges
    and calls are), else a selection."""
    runs = frame["run_id"].to_numpy()
    if len(runs) > 1 and (runs[1:] < runs[:-1]).any():
        return frame[runs == run_id]
    start, stop = np.searchsorted(runs, [run_id, run_id + 1])
    return frame.iloc[int(start) : int(stop)]
