"""Percent agreement between two sources of A / B / tie votes (MT-Bench S1 and S2).

Votes are long format: one row per vote with a unit key (for Concord: prompt, unordered pair of
answers, turn), a label in {"A", "B", "tie"} in canonical A/B terms, and a rater id. Source: L.
Zheng et al. (2023), "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", NeurIPS Datasets
and Benchmarks, section 4.2 and Table 2 (S1: tie is its own class; S2: comparisons involving a tie
are left out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from leaderboard.stats.majority import LABELS

if TYPE_CHECKING:
    import pandas as pd

Level = Literal["vote", "majority"]
_COLUMNS = ["key", "agree_s1", "total_s1", "agree_s2", "total_s2"]


@dataclass(frozen=True)
class AgreementCount:
    """``agree`` of ``total`` compared vote pairs agreed; ``rate`` is None when ``total`` is 0."""

    agree: int
    total: int
    rate: float | None

    @classmethod
    def of(cls, agree: int, total: int) -> AgreementCount:
        """Build a count, computing ``rate = agree / total`` (None for no comparisons)."""
        return cls(int(agree), int(total), float(agree / total) if total else None)


@dataclass(frozen=True)
class PairwiseAgreement:
    """Agreement with ties as a class (``s1``) and with tie votes dropped (``s2``)."""

    s1: AgreementCount
    s2: AgreementCount
    level: Level


@dataclass(frozen=True)
class AgreementInterval:
    """A pooled agreement rate with its bootstrap percentile interval over units."""

    rate: float
    lower: float
    upper: float
    confidence: float
    rounds: int
    seed: int
    n_units: int


@dataclass(frozen=True)
class _Coded:
    """Votes as integer codes: key (shared numbering across sources), label (0 A, 1 B, 2 tie)
    and rater."""

    key: npt.NDArray[np.int64]
    label: npt.NDArray[np.int64]
    rater: npt.NDArray[np.int64]


def _check_columns(votes: pd.DataFrame, key: str, label: str, rater: str) -> None:
    missing = {key, label, rater} - set(votes.columns)
    if missing:
        raise ValueError(f"votes lack the columns {sorted(missing)}")


def _label_codes(labels: pd.Series) -> npt.NDArray[np.int64]:
    import pandas as pd

    codes, values = pd.factorize(labels)
    found = values.tolist()
    unknown = set(found) - set(LABELS)
    if (codes < 0).any():
        unknown.add(None)
    if unknown:
        raise ValueError(f"labels must be in {LABELS}; found {sorted(map(str, unknown))}")
    position = np.array([LABELS.index(v) for v in found], dtype=np.int64)
    return position[codes] if len(found) else np.zeros(0, dtype=np.int64)


def key_codes(keys: pd.Series) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any] | pd.Index]:
    """Number the keys densely in sorted order (in order of appearance when they do not sort).

    Integer keys in a range not much wider than their count (a study's pair ids) are numbered
    by marking the range, in two array passes; others by pandas' factorize.
    """
    import pandas as pd

    values = keys.to_numpy()
    if values.dtype.kind in "iu" and values.size:
        low, high = int(values.min()), int(values.max())
        if high - low < 4 * values.size + 1024:
            offset = values - low
            seen = np.zeros(high - low + 1, dtype=bool)
            seen[offset] = True
            present = np.flatnonzero(seen)
            position = np.cumsum(seen) - 1
            return position[offset].astype(np.intp), present + low
    try:
        codes, uniques = pd.factorize(keys, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(keys)
    return codes.astype(np.intp, copy=False), uniques


def _encode_sources(
    frames: list[pd.DataFrame], key: str, label: str, rater: str
) -> tuple[list[_Coded], npt.NDArray[Any]]:
    """Code each frame's votes, numbering the keys of all frames together (sorted when the
    keys sort, else in order of appearance); return the codes and the key values."""
    import pandas as pd

    keys = pd.concat([f[key] for f in frames], ignore_index=True) if frames else pd.Series()
    codes, key_values = key_codes(keys)
    out = []
    start = 0
    for frame in frames:
        n = len(frame)
        rater_codes, _ = pd.factorize(frame[rater])
        out.append(
            _Coded(
                key=codes[start : start + n].astype(np.int64),
                label=_label_codes(frame[label]),
                rater=rater_codes.astype(np.int64),
            )
        )
        start += n
    return out, np.asarray(key_values)


def _counts(coded: _Coded, n_keys: int) -> npt.NDArray[np.int64]:
    """keys x (A, B, tie) vote counts."""
    flat = np.bincount(coded.key * 3 + coded.label, minlength=n_keys * 3)
    return flat.reshape(n_keys, 3).astype(np.int64)


def _pairs(n: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    result: npt.NDArray[np.int64] = n * (n - 1) // 2
    return result


def _within(coded: _Coded, n_keys: int) -> tuple[npt.NDArray[np.int64], ...]:
    """Per key: agreeing and compared unordered pairs of votes by different raters (S1, S2).

    All pairs on a key, minus the pairs whose two votes come from the same rater."""
    counts = _counts(coded, n_keys)
    a, b, t = counts[:, 0], counts[:, 1], counts[:, 2]
    agree_s2 = _pairs(a) + _pairs(b)
    agree_s1 = agree_s2 + _pairs(t)
    total_s1 = _pairs(a + b + t)
    total_s2 = _pairs(a + b)
    n_raters = int(coded.rater.max()) + 1 if coded.rater.size else 1
    cell = coded.key * n_raters + coded.rater
    cells, per_cell = np.unique(cell, return_counts=True)
    if (per_cell > 1).any():
        # Some rater voted twice on a key: take out the pairs of their own votes.
        by_cell = np.unique(cell * 3 + coded.label, return_counts=True)
        cell_key = cells // n_raters
        cell_label_key = by_cell[0] // 3 // n_raters
        cell_label = by_cell[0] % 3
        same = _pairs(by_cell[1].astype(np.int64))
        decisive_cell = np.unique(cell[coded.label < 2], return_counts=True)
        agree_s1 = agree_s1 - np.bincount(cell_label_key, same, n_keys).astype(np.int64)
        total_s1 = total_s1 - np.bincount(
            cell_key, _pairs(per_cell.astype(np.int64)), n_keys
        ).astype(np.int64)
        keep = cell_label < 2
        agree_s2 = agree_s2 - np.bincount(cell_label_key[keep], same[keep], n_keys).astype(np.int64)
        total_s2 = total_s2 - np.bincount(
            decisive_cell[0] // n_raters, _pairs(decisive_cell[1].astype(np.int64)), n_keys
        ).astype(np.int64)
    return agree_s1, total_s1, agree_s2, total_s2


def _across(
    cx: npt.NDArray[np.int64], cy: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], ...]:
    """Per key: every vote of x against every vote of y (S1), and decisive against decisive
    (S2); a key missing from either source has no comparisons."""
    # Column by column: numpy sums a row of three slowly, three columns fast.
    xa, xb, xt = cx[:, 0], cx[:, 1], cx[:, 2]
    ya, yb, yt = cy[:, 0], cy[:, 1], cy[:, 2]
    agree_s2 = xa * ya + xb * yb
    agree_s1 = agree_s2 + xt * yt
    decisive_x, decisive_y = xa + xb, ya + yb
    total_s1 = (decisive_x + xt) * (decisive_y + yt)
    total_s2 = decisive_x * decisive_y
    return agree_s1, total_s1, agree_s2, total_s2


def _majority_counts(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """One vote per key with votes: its majority label, "tie" when the top count is shared."""
    a, b, t = counts[:, 0], counts[:, 1], counts[:, 2]
    voted = (a + b + t) > 0
    # A unique top count wins; any shared top (or no votes) is a tie.
    winner = np.where((a > b) & (a > t), 0, np.where((b > a) & (b > t), 1, 2))
    out = np.zeros_like(counts)
    out[np.flatnonzero(voted), winner[voted]] = 1
    return out


def pairwise_agreement_by_unit(
    votes: pd.DataFrame,
    other: pd.DataFrame | None = None,
    *,
    level: Level = "vote",
    key: str = "key",
    label: str = "label",
    rater: str = "rater",
) -> pd.DataFrame:
    """Return per unit key the agreeing and compared vote pairs under S1 and S2.

    Columns: key, agree_s1, total_s1, agree_s2, total_s2; one row per key with at least one S1
    comparison, sorted by key (in order of first appearance when keys do not sort).
    Definitions as :func:`pairwise_agreement` (Zheng et al. 2023, Table 2).

    Computed from per-key label counts rather than by listing vote pairs: on a key with label
    counts ``c_A, c_B, c_tie`` (``n`` votes), agreeing pairs within one source number
    ``sum_l c_l (c_l - 1) / 2`` of ``n (n - 1) / 2``, less the pairs of one rater's own votes;
    across two sources ``sum_l c_l d_l`` of ``n m``. S2 uses the A and B counts only.
    """
    import pandas as pd

    if level not in ("vote", "majority"):
        raise ValueError("level must be 'vote' or 'majority'")
    _check_columns(votes, key, label, rater)
    if other is not None:
        _check_columns(other, key, label, rater)
    frames = [votes] if other is None else [votes, other]
    coded, key_values = _encode_sources(frames, key, label, rater)
    n_keys = len(key_values)
    if level == "majority" and other is None:
        raise ValueError("majority level compares two sources; pass `other`")
    if other is None:
        agree_s1, total_s1, agree_s2, total_s2 = _within(coded[0], n_keys)
    else:
        cx, cy = _counts(coded[0], n_keys), _counts(coded[1], n_keys)
        if level == "majority":
            cx, cy = _majority_counts(cx), _majority_counts(cy)
        agree_s1, total_s1, agree_s2, total_s2 = _across(cx, cy)
    keep = total_s1 > 0
    out = pd.DataFrame(
        {
            "key": key_values[keep],
            "agree_s1": agree_s1[keep],
            "total_s1": total_s1[keep],
            "agree_s2": agree_s2[keep],
            "total_s2": total_s2[keep],
        },
        columns=_COLUMNS,
    )
    return out.astype({c: np.int64 for c in _COLUMNS[1:]})


def pairwise_agreement(
    votes: pd.DataFrame,
    other: pd.DataFrame | None = None,
    *,
    level: Level = "vote",
    key: str = "key",
    label: str = "label",
    rater: str = "rater",
) -> PairwiseAgreement:
    """Return percent agreement with ties (S1) and without tie votes (S2).

    Formula: ``rate = agree / total`` over compared vote pairs. Source: Zheng et al. (2023),
    "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", Table 2 and its reference code.

    - ``other`` given (e.g. judge vs human), ``level="vote"``: each vote of ``votes`` is compared
      with each vote of ``other`` on the same key.
    - ``other`` None (e.g. human vs human), ``level="vote"``: every unordered pair of votes on the
      same key cast by different raters (two votes of one rater are never compared).
    - ``level="majority"`` (needs ``other``): each source's majority label per key is compared, one
      comparison per key both sources voted on. A tied majority (two or more labels share the top
      count, e.g. one A and one B) counts as "tie".
    - S1 counts every comparison, tie being its own class (random judge: 1/3). S2 keeps only the
      comparisons where neither side is a tie (random judge: 1/2).

    ``votes`` and ``other`` are long-format DataFrames; ``key``, ``label`` and ``rater`` name their
    columns. Labels must be "A", "B" or "tie" (ValueError otherwise).
    """
    per_unit = pairwise_agreement_by_unit(
        votes, other, level=level, key=key, label=label, rater=rater
    )
    return PairwiseAgreement(
        s1=AgreementCount.of(int(per_unit["agree_s1"].sum()), int(per_unit["total_s1"].sum())),
        s2=AgreementCount.of(int(per_unit["agree_s2"].sum()), int(per_unit["total_s2"].sum())),
        level=level,
    )


def bootstrap_agreement_ci(
    agree: npt.ArrayLike,
    total: npt.ArrayLike,
    *,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AgreementInterval:
    """Return the pooled agreement ``sum(agree) / sum(total)`` and a bootstrap interval over units.

    Each round draws n units (one entry of ``agree``/``total`` per unit, e.g. the columns of
    :func:`pairwise_agreement_by_unit`) with replacement and recomputes the pooled rate; the
    interval is the percentile interval of those rates (linear interpolation). Resampling units
    rather than vote pairs keeps the votes of one unit together, since they are not independent.
    Source: B. Efron & R. Tibshirani (1993), "An Introduction to the Bootstrap", ch. 13
    (percentile interval).

    Units with the same ``(agree, total)`` are interchangeable, so a round is drawn as how many
    times each distinct ``(agree, total)`` is picked: with ``u_j`` the distinct pairs (sorted)
    and ``c_j`` how many units have them, ``rng = numpy.random.default_rng(seed)`` and
    ``w = rng.multinomial(n, c / n, size=rounds)``; round ``r``'s rate is
    ``sum_j w_rj agree_j / sum_j w_rj total_j``. This is the distribution of drawing n units
    uniformly with replacement, at a cost that does not grow with the number of units.

    Degenerate input: with no comparisons at all, every field is NaN; a round whose sample holds
    no comparisons is skipped in the percentiles.
    """
    a = np.asarray(agree, dtype=np.float64)
    t = np.asarray(total, dtype=np.float64)
    if a.shape != t.shape or a.ndim != 1:
        raise ValueError("agree and total must be 1-D and of equal length")
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    n = a.size
    if n == 0 or t.sum() == 0:
        return AgreementInterval(math.nan, math.nan, math.nan, confidence, rounds, seed, n)
    whole = (a >= 0).all() and (t >= 0).all() and (a % 1 == 0).all() and (t % 1 == 0).all()
    if whole and max(a.max(), t.max()) < 2**26:
        # Whole counts: one integer per (agree, total), which sorts as the pairs do.
        width = int(t.max()) + 1
        codes, counts = np.unique(
            a.astype(np.int64) * width + t.astype(np.int64), return_counts=True
        )
        distinct = np.stack([codes // width, codes % width], axis=1).astype(np.float64)
    else:
        distinct, counts = np.unique(np.stack([a, t], axis=1), axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, counts / n, size=rounds).astype(np.float64)
    # Sums of whole numbers below 2**53: exact in float64, whatever the order of summation.
    sampled_agree = weights @ distinct[:, 0]
    sampled_total = weights @ distinct[:, 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(sampled_total > 0, sampled_agree / sampled_total, math.nan)
    tail = (1.0 - confidence) / 2.0
    lower, upper = np.nanquantile(rates, [tail, 1.0 - tail])
    return AgreementInterval(
        float(a.sum() / t.sum()), float(lower), float(upper), confidence, rounds, seed, n
    )
