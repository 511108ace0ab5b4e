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

from leaderboard.stats.proportion import wilson_interval

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


@dataclass(frozen=True)
class ClusterProportion:
    """A share of counted units with an interval that resamples the units' clusters.

    ``count`` of ``total`` units (votes, comparisons, triples) are hits; ``share`` is their ratio
    and ``lower``/``upper`` its interval (None without units, or when fewer than two clusters
    leave nothing to resample). ``unit`` names what one counted unit is; ``resampled`` what a
    bootstrap round draws with replacement (``"prompt"``, ``"contrast pair"``, or the unit
    itself), and ``clusters`` how many of those there are; ``method`` is ``"cluster bootstrap"``
    (a percentile interval over ``rounds`` rounds) or ``"wilson"`` (the units are independent,
    ``rounds`` 0). The first six fields are those of
    :class:`leaderboard.stats.proportion.Proportion`, so a page reads either alike.
    """

    count: int
    total: int
    share: float | None
    lower: float | None
    upper: float | None
    confidence: float
    unit: str = ""
    resampled: str = ""
    clusters: int = 0
    method: str = "cluster bootstrap"
    rounds: int = 0


def cluster_proportion(
    hits: npt.ArrayLike,
    clusters: npt.ArrayLike | None,
    *,
    unit: str,
    resampled: str,
    rounds: int,
    seed: int,
    confidence: float = 0.95,
) -> ClusterProportion:
    """Return the share of hits among units with a percentile interval over their clusters.

    ``hits[i]`` is True when unit i counts; ``clusters[i]`` is its cluster (any hashable label;
    None: every unit its own cluster). Formula: share = sum_i hits_i / n; the interval is
    :func:`cluster_share`'s over the per-cluster sums of hits and units.
    """
    flags = np.asarray(hits, dtype=bool)
    if flags.ndim != 1:
        raise ValueError("hits must be one flag per unit")
    return cluster_share(
        flags.astype(np.int64),
        np.ones(flags.size, dtype=np.int64),
        clusters,
        unit=unit,
        resampled=resampled,
        rounds=rounds,
        seed=seed,
        confidence=confidence,
    )


def cluster_share(
    counts: npt.ArrayLike,
    totals: npt.ArrayLike,
    clusters: npt.ArrayLike | None,
    *,
    unit: str,
    resampled: str,
    rounds: int,
    seed: int,
    confidence: float = 0.95,
) -> ClusterProportion:
    """Return sum(counts) / sum(totals) with a percentile interval that resamples clusters.

    Row r holds ``counts[r]`` hits among ``totals[r]`` units (one vote, or all the triples of one
    prompt) and belongs to cluster ``clusters[r]`` (None: each row its own cluster). A count may
    be fractional (a tie worth half a hit); ``count`` is then the rounded sum. Formula:
    share = sum_r counts_r / sum_r totals_r. Interval: a round draws the C clusters C times with
    replacement and takes every row of each cluster drawn (:func:`cluster_sums` of the
    per-cluster [hits, units]); the round's share is the ratio of its sums, and the interval the
    percentiles of the rounds' shares (:func:`percentile_interval`; a round that drew no unit is
    skipped). This is the cluster bootstrap of a ratio estimator (Efron & Tibshirani 1993,
    section 8.5; A. C. Cameron & D. L. Miller 2015, "A practitioner's guide to cluster-robust
    inference", J. Human Resources 50:317-372): units of one cluster (votes on one prompt, both
    directions of one contrast pair, the triples of one prompt) are not independent, and a
    Wilson interval over the units is too narrow when clusters differ. Fewer than two clusters
    with units: no interval (None).
    """
    import pandas as pd

    hit = np.asarray(counts, dtype=np.float64)
    size = np.asarray(totals, dtype=np.float64)
    if hit.ndim != 1 or hit.shape != size.shape:
        raise ValueError("counts and totals must be two 1-D arrays of one length")
    if (hit < 0).any() or (hit > size).any():
        raise ValueError("need 0 <= counts <= totals in every row")
    if clusters is None:
        codes = np.arange(hit.size)
    else:
        labels = np.asarray(clusters)
        # Integer labels (prompt ids) are factorised as numbers: no Python object per row.
        if labels.dtype.kind not in "iu":
            labels = np.asarray(clusters, dtype=object)
        if labels.shape != hit.shape:
            raise ValueError("need one cluster per row")
        codes, _ = pd.factorize(labels)
        if (codes < 0).any():
            raise ValueError("a row's cluster is missing (None or NaN)")
    count, total = int(round(hit.sum())), int(round(size.sum()))
    # The exact ratio: counts may carry halves (a tie counting half a correct vote).
    share = float(hit.sum() / size.sum()) if total else None
    n_clusters = int(codes.max()) + 1 if codes.size else 0
    rows = np.zeros((n_clusters, 2))
    np.add.at(rows[:, 0], codes, hit)
    np.add.at(rows[:, 1], codes, size)
    rows = rows[rows[:, 1] > 0]
    n_clusters = int(rows.shape[0])

    def result(lower: float | None, upper: float | None, ran: int) -> ClusterProportion:
        return ClusterProportion(
            count,
            total,
            share,
            lower,
            upper,
            confidence,
            unit,
            resampled,
            n_clusters,
            "cluster bootstrap",
            ran,
        )

    if n_clusters < 2 or share is None:
        return result(None, None, 0)
    sums = cluster_sums(rows, rounds=rounds, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = sums[:, 0] / sums[:, 1]
    interval = percentile_interval(
        share, shares, confidence=confidence, seed=seed, clusters=n_clusters
    )
    return result(interval.lower, interval.upper, rounds)


def independent_proportion(
    count: int, total: int, *, unit: str, confidence: float = 0.95
) -> ClusterProportion:
    """A share of independent units with its Wilson interval, in the shape of
    :func:`cluster_proportion` (``resampled`` is the unit itself, ``method`` "wilson").
    Source: :func:`leaderboard.stats.proportion.wilson_interval` (Wilson 1927)."""
    p = wilson_interval(count, total, confidence)
    return ClusterProportion(
        p.count, p.total, p.share, p.lower, p.upper, confidence, unit, unit, total, "wilson", 0
    )
