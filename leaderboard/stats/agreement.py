"""Chance-corrected reliability coefficients: Krippendorff's alpha, Fleiss' kappa, Cohen's kappa.

Percent agreement between sources (the MT-Bench S1/S2 definition) lives in ``pairwise.py`` and is
re-exported here, so that ``leaderboard.stats.agreement`` is the one place to look for agreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.stats.pairwise import (
    AgreementCount,
    AgreementInterval,
    PairwiseAgreement,
    bootstrap_agreement_ci,
    key_codes,
    pairwise_agreement,
    pairwise_agreement_by_unit,
)

__all__ = [
    "AgreementCount",
    "AgreementInterval",
    "PairwiseAgreement",
    "bootstrap_agreement_ci",
    "cohen_kappa",
    "fleiss_kappa",
    "krippendorff_alpha",
    "krippendorff_alpha_from_long",
    "pairwise_agreement",
    "pairwise_agreement_by_unit",
]

Level = Literal["nominal", "ordinal", "interval", "ratio"]
_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def _is_missing(value: Any) -> bool:
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
        return math.nan

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
    counts = counts[counts.sum(axis=1) >= 2]
    if counts.shape[0] == 0:
        return math.nan
    present = counts.sum(axis=0) > 0
    if int(present.sum()) < 2:
        return math.nan
    # Values seen only on unpairable units are dropped; for "ordinal" this keeps the rank
    # distances Krippendorff defines over pairable values only.
    counts, domain = counts[:, present].astype(np.float64), domain[present]
    per_unit = 1.0 / (counts.sum(axis=1) - 1.0)
    coincidences = (counts * per_unit[:, None]).T @ counts - np.diag(per_unit @ counts)
    n_c = coincidences.sum(axis=0)
    distance = _alpha_distances(domain, n_c, level)
    expected = float(n_c @ distance @ n_c)
    if expected == 0.0:
        return math.nan
    return 1.0 - (float(n_c.sum()) - 1.0) * float((coincidences * distance).sum()) / expected


def _alpha_distances(
    domain: npt.NDArray[np.float64], n_c: npt.NDArray[np.float64], level: Level
) -> npt.NDArray[np.float64]:
    """The squared distances ``d_ck`` of Krippendorff (2011) between the domain's values."""
    c, k = domain[:, None], domain[None, :]
    if level == "nominal":
        return (c != k).astype(np.float64)
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
