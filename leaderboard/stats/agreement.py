"""Chance-corrected reliability coefficients: Krippendorff's alpha, Fleiss' kappa, Cohen's kappa.

Percent agreement between sources (the MT-Bench S1/S2 definition) lives in ``pairwise.py`` and is
re-exported here, so that ``leaderboard.stats.agreement`` is the one place to look for agreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from leaderboard.stats.bootstrap import BootstrapInterval, cluster_sums, percentile_interval
from leaderboard.stats.pairwise import (
    AgreementCount,
    AgreementInterval,
    PairwiseAgreement,
    bootstrap_agreement_ci,
    key_codes,
    pairwise_agreement,
    pairwise_agreement_by_unit,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AgreementCount",
    "AgreementInterval",
    "PairwiseAgreement",
    "bootstrap_agreement_ci",
    "cohen_kappa",
    "fleiss_kappa",
    "fleiss_kappa_generalized",
    "fleiss_kappa_generalized_interval",
    "fleiss_kappa_interval",
    "krippendorff_alpha",
    "krippendorff_alpha_from_long",
    "krippendorff_alpha_interval",
    "pairwise_agreement",
    "pairwise_agreement_by_unit",
]

Level = Literal["nominal", "ordinal", "interval", "ratio"]
_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def _is_missing(value: Any) -> bool:
    import pandas as pd

    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def krippendorff_alpha(data: npt.ArrayLike | Sequence[Sequence[Any]], level: Level) -> float:
    """Return Krippendorff's alpha for a raters x units table with missing values.

    Formula: ``alpha = 1 - D_o / D_e`` where ``D_o`` is the observed disagreement in the
    coincidence matrix of pairable values and ``D_e`` the disagreement expected by chance, with
    the distance metric of ``level`` ("nominal", "ordinal", "interval", "ratio").
    Source: K. Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", Annenberg
    School for Communication, University of Pennsylvania.

    ``None`` and NaN mark a missing value. The table is turned into long format (unit, value) and
    handed to :func:`krippendorff_alpha_from_long`; see there for the degenerate cases (NaN). An
    empty table (``[]``, or no raters or no units) is NaN.
    """
    table = np.asarray(data, dtype=object)
    if table.size == 0:
        return math.nan  # no rater and no unit: nothing is pairable
    if table.ndim != 2:
        raise ValueError("data must be a 2-D raters x units table")
    units: list[int] = []
    values: list[Any] = []
    for rater, unit in np.ndindex(table.shape):
        value = table[rater, unit]
        if not _is_missing(value):
            units.append(unit)
            values.append(value)
    return krippendorff_alpha_from_long(units, values, level)


def krippendorff_alpha_from_long(
    units: npt.ArrayLike | Sequence[Any] | pd.Series,
    values: npt.ArrayLike | Sequence[Any] | pd.Series,
    level: Level,
) -> float:
    """Return Krippendorff's alpha from long-format (unit id, value) pairs, one per rating.

    Formula and source as :func:`krippendorff_alpha` (Krippendorff 2011). The ratings are counted
    into a units x values matrix ``n_uc`` (only units with at least two values are pairable and
    kept), whose coincidence matrix is ``o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1)``
    with ``m_u`` the unit's values; with ``n_c = sum_k o_ck`` and ``n = sum_c n_c``,
    ``alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck`` for the level's distance
    ``d``: nominal ``[c != k]``; ordinal ``(sum_{g=c..k} n_g - (n_c + n_k) / 2)²`` over the
    values in order; interval ``(c - k)²``; ratio ``((c - k) / (c + k))²``. No raters x units
    matrix is built, so memory grows with units x distinct values, which suits sparse crowd data
    on a Likert or label scale; the tests check it against the ``krippendorff`` package.

    Values: any hashable labels for "nominal" (a pandas Categorical is read by its codes);
    numbers for the other levels ("ordinal" orders them numerically; "interval" and "ratio" use
    their differences).

    Degenerate input returns NaN, never raises: no unit with two or more values (a single rater,
    or no overlap between raters), or only one distinct value among the pairable ratings (the
    expected disagreement ``D_e`` is 0 and Krippendorff 2011 calls alpha undefined there).
    """
    pairable = _pairable_counts(units, values, level)
    if pairable is None:
        return math.nan
    counts, domain, _ = pairable
    return _alpha_of(_coincidences(counts), domain, level)


def _pairable_counts(
    units: npt.ArrayLike | Sequence[Any] | pd.Series,
    values: npt.ArrayLike | Sequence[Any] | pd.Series,
    level: Level,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.intp]] | None:
    """The pairable units' value counts ``n_uc`` (units with two or more values; values seen
    only on unpairable units dropped), the values in order, and each kept unit's code in
    :func:`leaderboard.stats.pairwise.key_codes` numbering; None when fewer than two values or
    no unit are pairable (alpha is NaN)."""
    import pandas as pd

    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}, not {level!r}")
    unit_arr = units.to_numpy() if isinstance(units, pd.Series) else np.asarray(units)
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        value_arr: Any = values.array
    elif isinstance(values, pd.Series):
        value_arr = values.to_numpy()
    elif isinstance(values, pd.Categorical):
        value_arr = values
    else:
        value_arr = np.asarray(values, dtype=object)
    if unit_arr.shape != (len(value_arr),) or unit_arr.ndim != 1:
        raise ValueError("units and values must be 1-D and of equal length")
    if unit_arr.dtype.kind not in "iub":
        unit_arr = unit_arr.astype(object)
    keep = ~np.asarray(pd.isna(value_arr), dtype=bool)
    unit_arr, value_arr = unit_arr[keep], value_arr[keep]
    if unit_arr.size == 0:
        return None

    # Integer unit ids in a narrow range (a study's pair ids) are numbered by marking the range.
    unit_codes, _ = key_codes(pd.Series(unit_arr, copy=False))
    domain: npt.NDArray[Any]
    if level == "nominal":
        value_codes, domain_index = pd.factorize(value_arr)
        # The nominal metric ignores the domain's values; positions are enough.
        domain = np.arange(len(domain_index), dtype=np.float64)
    else:
        # The distinct values in numeric order, found by hashing rather than sorting them all.
        value_codes, uniques = pd.factorize(np.asarray(value_arr, dtype=np.float64), sort=True)
        domain = np.asarray(uniques, dtype=np.float64)

    n_units, n_values = int(unit_codes.max()) + 1, len(domain)
    counts = np.bincount(unit_codes * n_values + value_codes, minlength=n_units * n_values).reshape(
        n_units, n_values
    )
    kept = np.flatnonzero(counts.sum(axis=1) >= 2)
    counts = counts[kept]
    if counts.shape[0] == 0:
        return None
    present = counts.sum(axis=0) > 0
    if int(present.sum()) < 2:
        return None
    # Values seen only on unpairable units are dropped; for "ordinal" this keeps the rank
    # distances Krippendorff defines over pairable values only.
    return counts[:, present].astype(np.float64), domain[present], kept


def _coincidences(counts: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The coincidence matrix ``o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1)``."""
    per_unit = 1.0 / (counts.sum(axis=1) - 1.0)
    return np.asarray((counts * per_unit[:, None]).T @ counts - np.diag(per_unit @ counts))


def _alpha_of(
    coincidences: npt.NDArray[np.float64], domain: npt.NDArray[np.float64], level: Level
) -> float:
    """Alpha from a coincidence matrix (Krippendorff 2011); NaN where ``D_e`` is 0."""
    n_c = coincidences.sum(axis=0)
    distance = _alpha_distances(domain, n_c, level)
    expected = float(n_c @ distance @ n_c)
    if expected == 0.0:
        return math.nan
    return 1.0 - (float(n_c.sum()) - 1.0) * float((coincidences * distance).sum()) / expected


def _alphas_of(
    coincidences: npt.NDArray[np.float64], domain: npt.NDArray[np.float64], level: Level
) -> npt.NDArray[np.float64]:
    """:func:`_alpha_of` of each matrix of a rounds x values x values stack, at once (the
    ordinal distances from each round's own marginals); NaN where a round's ``D_e`` is 0."""
    n_c = coincidences.sum(axis=1)
    if level == "ordinal":
        cumulative = np.concatenate([np.zeros((len(n_c), 1)), np.cumsum(n_c, axis=1)], axis=1)
        i = np.arange(len(domain))
        low, high = np.minimum(i[:, None], i[None, :]), np.maximum(i[:, None], i[None, :])
        between = cumulative[:, high + 1] - cumulative[:, low]
        distance = (between - (n_c[:, low] + n_c[:, high]) / 2.0) ** 2
    else:
        distance = np.broadcast_to(_alpha_distances(domain, n_c[0], level), coincidences.shape)
    expected = np.einsum("rc,rck,rk->r", n_c, distance, n_c)
    observed = np.einsum("rck,rck->r", coincidences, distance)
    with np.errstate(invalid="ignore", divide="ignore"):
        alphas = 1.0 - (n_c.sum(axis=1) - 1.0) * observed / expected
    return np.where(expected == 0.0, math.nan, alphas)


def krippendorff_alpha_interval(
    units: npt.ArrayLike | Sequence[Any] | pd.Series,
    values: npt.ArrayLike | Sequence[Any] | pd.Series,
    level: Level,
    clusters: npt.ArrayLike | pd.Series | None = None,
    *,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapInterval:
    """Return Krippendorff's alpha with a bootstrap percentile interval over units or clusters.

    The estimate is :func:`krippendorff_alpha_from_long` (Krippendorff 2011). The coincidence
    matrix is a sum over units, ``o = sum_u o_u`` with ``o_u,ck = (n_uc n_uk - [c = k] n_uc) /
    (m_u - 1)``, so a round draws clusters of units with replacement (:func:`cluster_sums`, the
    cluster bootstrap of Efron & Tibshirani 1993) and computes alpha from the drawn clusters'
    summed ``o`` (the ordinal distances from that round's marginals). ``clusters`` gives one id
    per rating, the same for all ratings of a unit (for example the unit's prompt); without it
    each pairable unit is drawn on its own (Hayes & Krippendorff 2007, "Answering the call for
    a standard reliability measure for coding data", Commun. Methods Meas. 1(1):77-89, bootstrap
    alpha by resampling units). Rounds whose sample has no expected disagreement are skipped.
    ``clusters`` in the result counts the units or clusters drawn; NaN everywhere when alpha is.
    """
    pairable = _pairable_counts(units, values, level)
    if pairable is None:
        return percentile_interval(
            math.nan, np.full(rounds, math.nan), confidence=confidence, seed=seed, clusters=0
        )
    counts, domain, kept = pairable
    # What krippendorff_alpha_from_long computes, from the counts already made.
    estimate = _alpha_of(_coincidences(counts), domain, level)
    v = counts.shape[1]
    if clusters is None:
        # Units with the same value counts are interchangeable: one row per distinct count.
        distinct, multiplicity = np.unique(counts, axis=0, return_counts=True)
        rows = _unit_coincidences(distinct)
        drawn = len(counts)
    else:
        rows = _cluster_coincidences(units, values, clusters, counts, kept)
        multiplicity, drawn = None, len(rows)
    sums = cluster_sums(rows, rounds=rounds, seed=seed, multiplicity=multiplicity)
    alphas = _alphas_of(sums.reshape(-1, v, v), domain, level)
    return percentile_interval(estimate, alphas, confidence=confidence, seed=seed, clusters=drawn)


def _unit_coincidences(counts: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each unit's coincidence matrix ``o_u``, flattened: units x values²."""
    per_unit = 1.0 / (counts.sum(axis=1) - 1.0)
    outer = counts[:, :, None] * counts[:, None, :]
    idx = np.arange(counts.shape[1])
    outer[:, idx, idx] -= counts
    return np.asarray((outer * per_unit[:, None, None]).reshape(counts.shape[0], -1))


def _cluster_coincidences(
    units: npt.ArrayLike | Sequence[Any] | pd.Series,
    values: npt.ArrayLike | Sequence[Any] | pd.Series,
    clusters: npt.ArrayLike | pd.Series,
    counts: npt.NDArray[np.float64],
    kept: npt.NDArray[np.intp],
) -> npt.NDArray[np.float64]:
    """The summed ``o_u`` of each cluster's pairable units: clusters x values²."""
    import pandas as pd

    unit_arr = units.to_numpy() if isinstance(units, pd.Series) else np.asarray(units)
    cluster_arr = clusters.to_numpy() if isinstance(clusters, pd.Series) else np.asarray(clusters)
    if cluster_arr.shape != unit_arr.shape:
        raise ValueError("clusters must give one id per rating")
    missing = np.asarray(pd.isna(pd.Series(values, copy=False)), dtype=bool)
    if unit_arr.dtype.kind not in "iub":
        unit_arr = unit_arr.astype(object)
    unit_codes, _ = key_codes(pd.Series(unit_arr[~missing], copy=False))
    cluster_codes, _ = pd.factorize(pd.Series(cluster_arr[~missing], copy=False), sort=True)
    if (cluster_codes < 0).any():
        raise ValueError("clusters must give every rating a cluster id (found a missing one)")
    n_units = int(unit_codes.max()) + 1
    low = np.full(n_units, np.iinfo(np.int64).max)
    high = np.full(n_units, -1)
    np.minimum.at(low, unit_codes, cluster_codes)
    np.maximum.at(high, unit_codes, cluster_codes)
    if (low[kept] != high[kept]).any():
        raise ValueError("every rating of a unit must name the same cluster")
    # Units with the same value counts have the same o_u: each cluster's sum is how many of its
    # units have each distinct count row, times that row's o_u (clusters without a pairable
    # unit are left out, as they add nothing to o).
    clusters_of, cluster_of_unit = np.unique(low[kept], return_inverse=True)
    distinct, row_of_unit = _distinct_rows(counts)
    per_cluster = np.bincount(
        cluster_of_unit * len(distinct) + row_of_unit,
        minlength=len(clusters_of) * len(distinct),
    ).reshape(len(clusters_of), len(distinct))
    return per_cluster.astype(np.float64) @ _unit_coincidences(distinct)


def _distinct_rows(
    counts: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]]:
    """The distinct rows of a units x values matrix of whole counts (sorted) and each unit's
    row among them: the rows are read as numbers in base (largest count + 1), which sort as
    the rows do, when those fit in 63 bits (else ``numpy.unique`` on the rows, a sort of rows
    that costs seconds for a million units)."""
    base = int(counts.max()) + 1 if counts.size else 1
    if counts.shape[1] * math.log2(base) < 62:
        weights = base ** np.arange(counts.shape[1] - 1, -1, -1, dtype=np.int64)
        codes, row_of_unit = np.unique(counts.astype(np.int64) @ weights, return_inverse=True)
        digits = (codes[:, None] // weights[None, :]) % base
        return digits.astype(np.float64), row_of_unit.reshape(-1)
    distinct, row_of_unit = np.unique(counts, axis=0, return_inverse=True)
    return distinct, row_of_unit.reshape(-1)


def _alpha_distances(
    domain: npt.NDArray[np.float64], n_c: npt.NDArray[np.float64], level: Level
) -> npt.NDArray[np.float64]:
    """The squared distances ``d_ck`` of Krippendorff (2011) between the domain's values."""
    c, k = domain[:, None], domain[None, :]
    if level == "nominal":
        differ: npt.NDArray[np.bool_] = c != k
        return differ.astype(np.float64)
    if level == "interval":
        return np.asarray((c - k) ** 2, dtype=np.float64)
    if level == "ratio":
        total = c + k
        ratio = np.divide(c - k, total, out=np.zeros(np.broadcast(c, k).shape), where=total != 0)
        return np.asarray(ratio**2, dtype=np.float64)
    # Ordinal: the values between c and k inclusive, less half of each end's count.
    cumulative = np.concatenate([[0.0], np.cumsum(n_c)])
    i = np.arange(len(domain))
    low, high = np.minimum(i[:, None], i[None, :]), np.maximum(i[:, None], i[None, :])
    between = cumulative[high + 1] - cumulative[low]
    return np.asarray((between - (n_c[low] + n_c[high]) / 2.0) ** 2, dtype=np.float64)


def fleiss_kappa(counts: npt.ArrayLike) -> float:
    """Return Fleiss' kappa for a subjects x categories table of rating counts.

    Formula: with ``n`` ratings per subject, ``P_i = (sum_j n_ij² - n) / (n (n - 1))``,
    ``P_bar = mean_i P_i``, ``p_j = sum_i n_ij / (N n)``, ``P_e = sum_j p_j²``,
    ``kappa = (P_bar - P_e) / (1 - P_e)``.
    Source: J. L. Fleiss (1971), "Measuring nominal scale agreement among many raters",
    Psychological Bulletin 76(5):378-382.

    Every subject must have the same number of ratings (ValueError otherwise). Degenerate input
    returns NaN: no subjects, fewer than two ratings per subject, or ``P_e = 1`` (one category
    only, or every rating in the same category), where kappa is 0/0.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError("counts must be a 2-D subjects x categories table")
    if table.size and (table < 0).any():
        raise ValueError("counts must be non-negative")
    if table.shape[0] == 0:
        return math.nan
    per_subject = table.sum(axis=1)
    if not np.allclose(per_subject, per_subject[0]):
        raise ValueError("every subject needs the same number of ratings")
    n = float(per_subject[0])
    if n < 2:
        return math.nan
    p_i = ((table**2).sum(axis=1) - n) / (n * (n - 1.0))
    p_bar = float(p_i.mean())
    p_j = table.sum(axis=0) / (table.shape[0] * n)
    p_e = float((p_j**2).sum())
    if math.isclose(p_e, 1.0):
        return math.nan
    return (p_bar - p_e) / (1.0 - p_e)


def fleiss_kappa_interval(
    counts: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    *,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapInterval:
    """Return Fleiss' kappa with a bootstrap percentile interval over subjects or clusters.

    The estimate is :func:`fleiss_kappa` (Fleiss 1971) of the subjects x categories table
    ``counts`` (the same number ``n`` of ratings per subject). It depends on the subjects only
    through the sums ``N``, ``sum_i P_i`` and ``sum_i n_ij``, so a round draws clusters of
    subjects with replacement (:func:`cluster_sums`; Efron & Tibshirani 1993, section 8.5) and
    computes ``kappa = (P_bar - P_e) / (1 - P_e)`` from the drawn clusters' sums. ``clusters``
    gives one id per subject (for example its prompt); without it each subject is drawn on its
    own. Rounds where kappa is undefined (``P_e = 1``) are skipped; NaN everywhere when the
    estimate is NaN. ``clusters`` in the result counts the subjects or clusters drawn.
    """
    import pandas as pd

    estimate = fleiss_kappa(counts)
    table = np.asarray(counts, dtype=np.float64)
    if math.isnan(estimate):
        return percentile_interval(
            math.nan, np.full(rounds, math.nan), confidence=confidence, seed=seed, clusters=0
        )
    n = float(table[0].sum())
    p_i = ((table**2).sum(axis=1) - n) / (n * (n - 1.0))
    rows = np.column_stack([np.ones(len(table)), p_i, table])
    if clusters is not None:
        ids = np.asarray(clusters)
        if ids.shape != (len(table),):
            raise ValueError("clusters must give one id per subject")
        codes, uniques = pd.factorize(pd.Series(ids, copy=False), sort=True)
        if (codes < 0).any():
            raise ValueError("clusters must give every subject a cluster id (found a missing one)")
        summed = np.zeros((len(uniques), rows.shape[1]))
        np.add.at(summed, codes, rows)
        rows = summed
    sums = cluster_sums(rows, rounds=rounds, seed=seed)
    subjects = sums[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_bar = sums[:, 1] / subjects
        p_e = ((sums[:, 2:] / (subjects[:, None] * n)) ** 2).sum(axis=1)
        kappas = np.where(np.isclose(p_e, 1.0), math.nan, (p_bar - p_e) / (1.0 - p_e))
    return percentile_interval(
        estimate, kappas, confidence=confidence, seed=seed, clusters=rows.shape[0]
    )


def _generalized_rows(table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per subject with two or more ratings: [1, P_i, n_i1 / n_i, ..., n_ik / n_i]."""
    n_i = table.sum(axis=1)
    keep = n_i >= 2
    table, n_i = table[keep], n_i[keep]
    p_i = ((table * (table - 1.0)).sum(axis=1)) / (n_i * (n_i - 1.0))
    return np.column_stack([np.ones(len(table)), p_i, table / n_i[:, None]])


def _generalized_kappa(sums: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    subjects = sums[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_a = sums[..., 1] / subjects
        p_e = ((sums[..., 2:] / subjects[..., None]) ** 2).sum(axis=-1)
        return np.asarray(
            np.where(np.isclose(p_e, 1.0), math.nan, (p_a - p_e) / (1.0 - p_e)), dtype=np.float64
        )


def fleiss_kappa_generalized(counts: npt.ArrayLike) -> float:
    """Return Fleiss' kappa generalised to subjects rated by different numbers of raters.

    Formula, over the n' subjects with r_i >= 2 ratings (r_ik of them in category k):
    ``p_a = (1/n') sum_i sum_k r_ik (r_ik - 1) / (r_i (r_i - 1))``,
    ``pi_k = (1/n') sum_i r_ik / r_i``, ``p_e = sum_k pi_k^2``,
    ``kappa = (p_a - p_e) / (1 - p_e)``. Source: K. L. Gwet (2014), "Handbook of Inter-Rater
    Reliability", 4th ed., section 2.4 (Fleiss' generalised kappa with missing ratings; Gwet
    averages pi_k over the subjects with one rating or more, here those with two or more, the
    subjects p_a uses). With the same number n of ratings on every subject it is Fleiss (1971)'s
    kappa (:func:`fleiss_kappa`): P_i = (sum_k r_ik^2 - n) / (n (n - 1)) and pi_k = p_k. NaN
    without a subject with two ratings, or when ``p_e = 1``.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError("counts must be a 2-D subjects x categories table")
    if table.size and (table < 0).any():
        raise ValueError("counts must be non-negative")
    rows = _generalized_rows(table)
    if rows.shape[0] == 0:
        return math.nan
    return float(_generalized_kappa(rows.sum(axis=0)))


def fleiss_kappa_generalized_interval(
    counts: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    *,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapInterval:
    """:func:`fleiss_kappa_generalized` with a bootstrap percentile interval over subjects or
    their clusters (one id per subject, e.g. its prompt). The kappa depends on the subjects
    only through the sums of [1, P_i, r_ik / r_i], so a round sums the drawn clusters' rows
    (:func:`cluster_sums`; Efron & Tibshirani 1993, section 8.5). Subjects with fewer than two
    ratings are left out before drawing; rounds where kappa is undefined are skipped."""
    import pandas as pd

    table = np.asarray(counts, dtype=np.float64)
    estimate = fleiss_kappa_generalized(table)
    if math.isnan(estimate):
        return percentile_interval(
            math.nan, np.full(rounds, math.nan), confidence=confidence, seed=seed, clusters=0
        )
    keep = table.sum(axis=1) >= 2
    rows = _generalized_rows(table)
    if clusters is not None:
        ids = np.asarray(clusters)
        if ids.shape != (len(table),):
            raise ValueError("clusters must give one id per subject")
        codes, uniques = pd.factorize(pd.Series(ids[keep], copy=False), sort=True)
        if (codes < 0).any():
            raise ValueError("clusters must give every subject a cluster id (found a missing one)")
        summed = np.zeros((len(uniques), rows.shape[1]))
        np.add.at(summed, codes, rows)
        rows = summed
    kappas = _generalized_kappa(cluster_sums(rows, rounds=rounds, seed=seed))
    return percentile_interval(
        estimate, kappas, confidence=confidence, seed=seed, clusters=rows.shape[0]
    )


def cohen_kappa(
    rater_a: npt.ArrayLike,
    rater_b: npt.ArrayLike,
    weights: Literal["linear", "quadratic"] | None = None,
    *,
    categories: Sequence[Any] | None = None,
) -> float:
    """Return Cohen's kappa (optionally weighted) between two raters on the same items.

    Formula: ``kappa = 1 - sum_ij w_ij o_ij / sum_ij w_ij e_ij`` with ``o`` the observed
    proportions, ``e`` the product of the marginals, and disagreement weights ``w_ij = [i != j]``
    (unweighted, equal to ``(p_o - p_e)/(1 - p_e)``), ``|i - j|/(k - 1)`` (linear) or
    ``(i - j)²/(k - 1)²`` (quadratic), ``i, j`` being positions in the ordered categories.
    Sources: J. Cohen (1960), "A coefficient of agreement for nominal scales", Educ. Psychol.
    Meas. 20:37-46; J. Cohen (1968), "Weighted kappa", Psychol. Bull. 70(4):213-220.

    ``categories`` gives the category order for weighting (default: the sorted labels seen).
    Degenerate input returns NaN: no items, or chance agreement of 1 (both raters used one and
    the same category), where kappa is 0/0.
    """
    import pandas as pd

    # Numbers stay numbers (factorised as such); anything else is compared as objects.
    a, b = np.asarray(rater_a), np.asarray(rater_b)
    if a.dtype.kind not in "iub" or b.dtype.kind not in "iub":
        a, b = a.astype(object), b.astype(object)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("rater_a and rater_b must be 1-D and of equal length")
    if weights not in (None, "linear", "quadratic"):
        raise ValueError("weights must be None, 'linear' or 'quadratic'")
    if a.size == 0:
        return math.nan
    cats = list(categories) if categories is not None else sorted(set(a.tolist()) | set(b.tolist()))
    index = {c: i for i, c in enumerate(cats)}

    def positions(labels: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        # Each distinct label is looked up once, not once per item.
        codes, distinct = pd.factorize(labels, use_na_sentinel=False)
        try:
            lookup = np.array([index[x] for x in distinct.tolist()], dtype=np.int64)
        except KeyError as exc:
            raise ValueError(f"label {exc.args[0]!r} is not among the categories") from exc
        return lookup[codes]

    ia, ib = positions(a), positions(b)
    k = len(cats)
    observed = np.bincount(ia * k + ib, minlength=k * k).reshape(k, k) / a.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    pos = np.arange(k)
    diff = np.abs(pos[:, None] - pos[None, :]).astype(np.float64)
    if weights is None:
        w = (diff > 0).astype(np.float64)
    elif weights == "linear":
        w = diff / max(k - 1, 1)
    else:
        w = diff**2 / max(k - 1, 1) ** 2
    denom = float((w * expected).sum())
    if math.isclose(denom, 0.0, abs_tol=1e-15):
        return math.nan
    return 1.0 - float((w * observed).sum()) / denom
