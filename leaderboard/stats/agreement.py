"""Chance-corrected reliability coefficients: Krippendorff's alpha, Fleiss' kappa, Cohen's kappa.

Percent agreement between sources (the MT-Bench S1/S2 definition) lives in ``pairwise.py`` and is
re-exported here, so that ``leaderboard.stats.agreement`` is the one place to look for agreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import krippendorff
import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.stats.pairwise import (
    AgreementCount,
    AgreementInterval,
    PairwiseAgreement,
    bootstrap_agreement_ci,
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
    handed to :func:`krippendorff_alpha_from_long`; see there for the degenerate cases (NaN).
    """
    table = np.asarray(data, dtype=object)
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
    units: npt.ArrayLike | Sequence[Any], values: npt.ArrayLike | Sequence[Any], level: Level
) -> float:
    """Return Krippendorff's alpha from long-format (unit id, value) pairs, one per rating.

    Formula and source as :func:`krippendorff_alpha` (Krippendorff 2011). The ratings are counted
    into a units x values matrix (``value_counts``), only units with at least two values are kept
    (the others are not pairable and do not enter ``alpha``), and the ``krippendorff`` package
    computes alpha from those counts. No raters x units matrix is built, so memory grows with
    units x distinct values, which suits sparse crowd data on a Likert or label scale.

    Values: any hashable labels for "nominal"; numbers for the other levels ("ordinal" orders
    them numerically; "interval" and "ratio" use their differences).

    Degenerate input returns NaN, never raises: no unit with two or more values (a single rater,
    or no overlap between raters), or only one distinct value among the pairable ratings (the
    expected disagreement ``D_e`` is 0 and Krippendorff 2011 calls alpha undefined there).
    """
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}, not {level!r}")
    unit_arr = np.asarray(units, dtype=object)
    value_arr = np.asarray(values, dtype=object)
    if unit_arr.shape != value_arr.shape or unit_arr.ndim != 1:
        raise ValueError("units and values must be 1-D and of equal length")
    # pd.isna on an object array tests each element as _is_missing does, in one pass.
    keep = ~np.asarray(pd.isna(value_arr), dtype=bool)
    unit_arr, value_arr = unit_arr[keep], value_arr[keep]
    if unit_arr.size == 0:
        return math.nan

    unit_codes, _ = pd.factorize(pd.Series(unit_arr, dtype=object))
    domain: npt.NDArray[Any]
    if level == "nominal":
        value_codes, domain_index = pd.factorize(pd.Series(value_arr, dtype=object))
        # The nominal metric ignores the domain's values; positions are enough.
        domain = np.arange(len(domain_index), dtype=np.float64)
    else:
        numeric = value_arr.astype(np.float64)
        domain, value_codes = np.unique(numeric, return_inverse=True)

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
    counts, domain = counts[:, present], domain[present]
    result = krippendorff.alpha(
        value_counts=counts, value_domain=domain, level_of_measurement=level
    )
    return float(result)


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
    a = np.asarray(rater_a, dtype=object)
    b = np.asarray(rater_b, dtype=object)
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
