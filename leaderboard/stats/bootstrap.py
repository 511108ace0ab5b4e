"""The cluster bootstrap of additive statistics: sums of per-cluster rows over resampled clusters.

A statistic that is a function of sums over units (Fleiss' kappa of its P_i and category counts,
Krippendorff's alpha of its coincidence matrix, a pooled rate of its agree and total counts) is
bootstrapped by drawing clusters (prompts, or the units themselves) with replacement and summing
their rows; the statistic is then computed from each round's sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# Rounds whose draws are made at once, so that rounds x distinct clusters stays about this size.
_BLOCK_CELLS = 1 << 22


@dataclass(frozen=True)
class BootstrapInterval:
    """A bootstrap percentile interval: the estimate on all the data, the interval's ends, the
    confidence, the rounds run, the seed and how many clusters each round drew."""

    estimate: float
    lower: float
    upper: float
    confidence: float
    rounds: int
    seed: int
    clusters: int


def cluster_sums(
    rows: npt.ArrayLike,
    *,
    rounds: int,
    seed: int,
    multiplicity: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float64]:
    """Return, for each bootstrap round, the column sums of C rows drawn with replacement.

    ``rows`` is a C x k matrix, one row per cluster (the sums of its units' contributions). A
    round draws C clusters uniformly with replacement, C times (the cluster, or block, bootstrap:
    B. Efron & R. Tibshirani (1993), "An Introduction to the Bootstrap", section 8.5 and ch. 13),
    and sums their rows. With ``rng = numpy.random.default_rng(seed)``, in blocks of rounds (the
    generator's stream continuing), a round is drawn one of two ways, both that distribution:

    - when the distinct rows ``u_j`` (sorted; ``c_j`` clusters have them) are at most a quarter
      of the clusters, as how often each distinct row is picked,
      ``w = rng.multinomial(C, c / C, size=rounds)``, round ``r``'s sums ``sum_j w_rj u_j``: a
      cost that grows with the distinct rows, not the clusters;
    - otherwise (clusters that mostly differ, such as prompts' sums), as C cluster indices
      ``rng.integers(0, C, size=(rounds, C), dtype=numpy.int32)``, counted per cluster
      (``numpy.bincount``) and multiplied into the rows: C uniform integers per round are
      cheaper than a binomial draw per distinct row.

    With ``multiplicity``, row ``j`` stands for ``multiplicity[j]`` clusters with that row (the
    caller has merged them; the rows are used in the order given, drawn by the first way).
    Returns a rounds x k matrix.
    """
    table = np.asarray(rows, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError("rows must be a 2-D clusters x values matrix")
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if multiplicity is None:
        distinct, counts = np.unique(table, axis=0, return_counts=True)
    else:
        distinct, counts = table, np.asarray(multiplicity, dtype=np.int64)
        if counts.shape != (table.shape[0],) or (counts < 0).any():
            raise ValueError("multiplicity must give a non-negative count per row")
    clusters = int(counts.sum())
    if clusters == 0:
        return np.zeros((rounds, table.shape[1]))
    rng = np.random.default_rng(seed)
    sums = np.empty((rounds, table.shape[1]))
    by_index = multiplicity is None and 4 * len(counts) > clusters
    block = max(1, _BLOCK_CELLS // (clusters if by_index else len(counts)))
    for start in range(0, rounds, block):
        size = min(block, rounds - start)
        if by_index:
            picks = rng.integers(0, clusters, size=(size, clusters), dtype=np.int32)
            # Counted round by round: each round's counts stay in cache, where one count of
            # the whole block would scatter over a block-sized array.
            weights = np.empty((size, clusters))
            for row in range(size):
                weights[row] = np.bincount(picks[row], minlength=clusters)
            sums[start : start + size] = weights @ table
        else:
            weights = rng.multinomial(clusters, counts / clusters, size=size).astype(np.float64)
            sums[start : start + size] = weights @ distinct
    return sums


def percentile_interval(
    estimate: float,
    replicates: npt.ArrayLike,
    *,
    confidence: float,
    seed: int,
    clusters: int,
) -> BootstrapInterval:
    """The percentile interval of bootstrap replicates (NaN replicates skipped; linear
    interpolation), Efron & Tibshirani (1993), ch. 13. All NaN gives NaN ends."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    values = np.asarray(replicates, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        lower = upper = float("nan")
    else:
        lower, upper = (float(v) for v in np.quantile(finite, [tail, 1.0 - tail]))
    return BootstrapInterval(estimate, lower, upper, confidence, values.size, seed, clusters)
