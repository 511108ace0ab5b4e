"""Active pair selection: which pairs most need a person's label, how likely each pair was to be
chosen, and estimates that stay unbiased when the labels were not drawn uniformly.

A pair's priority is a weighted mean of four terms, each in [0, 1]:

- *judge disagreement*: the automatic judges' verdicts on the pair disagree
  (:func:`disagreement_share` of their collapsed verdicts);
- *interval overlap*: the leaderboard intervals of the pair's two systems overlap, so people's
  votes on it can still move the ranking (:func:`interval_overlap`);
- *human disagreement*: the people who already judged the pair disagree;
- *under-coverage*: the pair's category has fewer labels per pair than the study as a whole
  (:func:`category_under_coverage`).

Labels are then drawn with :func:`selection_probabilities`: a share of every draw (20% by default)
is uniform over the pairs still open, the rest in proportion to priority, so that every pair keeps
a positive chance and the propensity of each draw is known. :func:`lure_weights` turns the
propensities of a sequence of draws made without replacement into weights under which the mean of
any per-label quantity is an unbiased estimate of its mean over the whole pool, and
:func:`weighted_agreement` is such a mean (agreement of a judge with people) with a bootstrap
interval over prompts.

The live priority (what the analysis worker stores, leaderboard.services.priority) is
:func:`neyman_priority`: Neyman's allocation over the judges' agreement strata
(:func:`judge_call_strata`), the design the MT-Bench replay found narrowest for the judge's
agreement with people (docs/active.md); the four-term score above stays for the replay's
comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.stats.bootstrap import BootstrapInterval, cluster_sums, percentile_interval

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

DEFAULT_RANDOM_SHARE = 0.2
TERMS = ("judge_disagreement", "interval_overlap", "human_disagreement", "under_coverage")


@dataclass(frozen=True)
class PriorityWeights:
    """How much each term counts in a pair's priority (non-negative, not all zero)."""

    judge_disagreement: float = 1.0
    interval_overlap: float = 1.0
    human_disagreement: float = 1.0
    under_coverage: float = 1.0

    def as_dict(self) -> dict[str, float]:
        return {term: float(getattr(self, term)) for term in TERMS}


def disagreement_share(counts: npt.ArrayLike) -> FloatArray:
    """Return, per row of label counts (pairs x K labels), how far the labels are from unanimous.

    Formula: ``(1 - m / n) / (1 - ceil(n / K) / n)``, where ``n`` is the row's number of labels,
    ``m`` the count of its most frequent label and ``ceil(n / K) / n`` the smallest modal share n
    labels over K categories allow; so 0 is unanimous and 1 is as evenly split as n labels can be.
    A row with fewer than two labels has no disagreement to show and gets 0. (The non-modal share
    ``1 - m / n`` is the variation ratio, L. C. Freeman (1965), "Elementary Applied Statistics",
    ch. 10; the division rescales it to [0, 1] for any n.)
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] < 2:
        raise ValueError("counts must be a pairs x labels matrix with at least two labels")
    if (table < 0).any():
        raise ValueError("counts must be non-negative")
    n = table.sum(axis=1)
    k = table.shape[1]
    out = np.zeros(table.shape[0])
    many = n >= 2
    if many.any():
        nm = n[many]
        modal = table[many].max(axis=1)
        floor_share = np.ceil(nm / k) / nm
        out[many] = (1.0 - modal / nm) / (1.0 - floor_share)
    return out


def interval_overlap(
    lower_a: npt.ArrayLike, upper_a: npt.ArrayLike, lower_b: npt.ArrayLike, upper_b: npt.ArrayLike
) -> FloatArray:
    """Return how much two intervals overlap, per pair: the length of their intersection over the
    length of the shorter one (0 when they are disjoint, 1 when one holds the other).

    An interval with a missing end (NaN: a system without enough votes for one) counts as fully
    overlapping, since nothing yet separates the two systems. Two points (zero-length intervals)
    overlap fully only when they coincide.
    """
    la, ua, lb, ub = (np.asarray(v, dtype=np.float64) for v in (lower_a, upper_a, lower_b, upper_b))
    inter = np.minimum(ua, ub) - np.maximum(la, lb)
    shorter = np.minimum(ua - la, ub - lb)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(shorter > 0, inter / shorter, np.where(inter >= 0, 1.0, 0.0))
    share = np.clip(share, 0.0, 1.0)
    unknown = np.isnan(la) | np.isnan(ua) | np.isnan(lb) | np.isnan(ub)
    return np.where(unknown, 1.0, share)


def category_under_coverage(labels: npt.ArrayLike, categories: npt.ArrayLike) -> FloatArray:
    """Return, per pair, how far its category falls short of the study's labels per pair.

    Formula: ``max(0, 1 - r_c / r)``, with ``r_c`` the labels per pair in the pair's category and
    ``r`` the labels per pair over all pairs; 1 for a category without labels while others have
    some, 0 for a category at or above the study's rate. Before any label every pair gets 0.
    """
    n = np.asarray(labels, dtype=np.float64)
    codes, _ = _codes(np.asarray(categories))
    if n.shape != codes.shape:
        raise ValueError("labels and categories must have one entry per pair")
    if n.size == 0:
        return np.zeros(0)
    total = n.sum()
    if total == 0:
        return np.zeros(n.size)
    overall = total / n.size
    per_category = np.bincount(codes, weights=n) / np.bincount(codes)
    weights: npt.NDArray[np.float64] = np.clip(1.0 - per_category[codes] / overall, 0.0, 1.0)
    return weights


def pair_priority(terms: Mapping[str, npt.ArrayLike], weights: PriorityWeights) -> FloatArray:
    """Return each pair's priority: ``sum_k w_k t_k / sum_k w_k`` over the four terms ``t_k``
    (each in [0, 1], named as in :data:`TERMS`), so a priority lies in [0, 1] too."""
    missing = set(TERMS) - set(terms)
    if missing:
        raise ValueError(f"priority terms missing: {sorted(missing)}")
    w = weights.as_dict()
    if any(v < 0 or not math.isfinite(v) for v in w.values()) or sum(w.values()) == 0:
        raise ValueError("priority weights must be finite, non-negative and not all zero")
    arrays = {term: np.asarray(terms[term], dtype=np.float64) for term in TERMS}
    shapes = {a.shape for a in arrays.values()}
    if len(shapes) != 1:
        raise ValueError("every priority term needs one value per pair")
    for term, values in arrays.items():
        if ((values < 0) | (values > 1) | np.isnan(values)).any():
            raise ValueError(f"priority term {term} must lie in [0, 1]")
    total = sum(w[term] * arrays[term] for term in TERMS)
    return np.asarray(total / sum(w.values()), dtype=np.float64)


def priority_terms(
    *,
    judge_counts: npt.ArrayLike,
    human_counts: npt.ArrayLike,
    lower_a: npt.ArrayLike,
    upper_a: npt.ArrayLike,
    lower_b: npt.ArrayLike,
    upper_b: npt.ArrayLike,
    categories: npt.ArrayLike,
) -> dict[str, FloatArray]:
    """Return the four priority terms of each pair, named as in :data:`TERMS`.

    - ``judge_disagreement``: :func:`disagreement_share` of the automatic judges' collapsed
      verdicts on the pair (``judge_counts``, pairs x labels: every judge call, both orders);
    - ``interval_overlap``: :func:`interval_overlap` of the leaderboard intervals of the pair's
      two systems (``lower_a``/``upper_a`` for the system of answer A, ``_b`` for B; NaN where a
      system has no interval yet, which counts as full overlap);
    - ``human_disagreement``: :func:`disagreement_share` of the people's collapsed votes on the
      pair (``human_counts``, pairs x labels);
    - ``under_coverage``: :func:`category_under_coverage` of the pair's human votes
      (``human_counts`` summed per pair) in its category.
    """
    humans = np.asarray(human_counts, dtype=np.float64)
    return {
        "judge_disagreement": disagreement_share(judge_counts),
        "interval_overlap": interval_overlap(lower_a, upper_a, lower_b, upper_b),
        "human_disagreement": disagreement_share(humans),
        "under_coverage": category_under_coverage(humans.sum(axis=1), categories),
    }


def selection_probabilities(
    priority: npt.ArrayLike, *, random_share: float = DEFAULT_RANDOM_SHARE
) -> FloatArray:
    """Return the probability that the next draw takes each open pair.

    Formula: ``q_i = e / k + (1 - e) p_i / sum_j p_j`` over the k open pairs, with ``e`` the
    random share and ``p_i`` the priorities; all priorities zero gives the uniform draw. With
    ``e > 0`` every open pair has ``q_i >= e / k > 0``, which the unbiased estimates need
    (a pair that can never be drawn cannot be weighted back in).
    """
    if not 0.0 < random_share <= 1.0:
        raise ValueError("random_share must lie in (0, 1]: without random draws no weight is known")
    p = np.asarray(priority, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("priority must be a non-empty 1-D array")
    if (p < 0).any() or np.isnan(p).any():
        raise ValueError("priorities must be non-negative")
    k = p.size
    total = p.sum()
    if total == 0:
        return np.full(k, 1.0 / k)
    return np.asarray(random_share / k + (1.0 - random_share) * p / total, dtype=np.float64)


def lure_weights(propensities: npt.ArrayLike, pool_size: int) -> FloatArray:
    """Return the LURE weights of M labels drawn one at a time, without replacement, from a pool
    of N items, where ``propensities[m - 1]`` is the probability ``q_m`` with which the m-th draw
    took the item it took (given the draws before it).

    Formula (Farquhar, Gal & Rainforth (2021), "On Statistical Bias in Active Learning: How and
    When to Fix It", ICLR, Eq. 4, the "levelled unbiased risk estimator"):
    ``v_m = 1 + (N - M) / (N - m) * (1 / ((N - m + 1) q_m) - 1)``, and then
    ``(1 / M) sum_m v_m L_m`` is an unbiased estimate of the pool's mean ``(1 / N) sum_i L_i``
    of any per-item quantity L, whatever (positive) proposal made the draws. A uniform draw
    (``q_m = 1 / (N - m + 1)``) gives ``v_m = 1``; with M = N every weight is 1.
    """
    q = np.asarray(propensities, dtype=np.float64)
    n_labels = q.size
    if q.ndim != 1:
        raise ValueError("propensities must be 1-D, one per draw in draw order")
    if n_labels > pool_size:
        raise ValueError("more draws than items in the pool")
    if ((q <= 0) | (q > 1) | np.isnan(q)).any():
        raise ValueError("each propensity must lie in (0, 1]")
    m = np.arange(1, n_labels + 1, dtype=np.float64)
    weights = np.ones(n_labels)
    # v_m is 1 for m = N (N - M = 0 and N - m = 0); the formula's 0/0 is left out there.
    inner = m < pool_size
    mi = m[inner]
    weights[inner] = 1.0 + (pool_size - n_labels) / (pool_size - mi) * (
        1.0 / ((pool_size - mi + 1.0) * q[inner]) - 1.0
    )
    return weights


def weighted_agreement(
    agree: npt.ArrayLike,
    weights: npt.ArrayLike,
    clusters: npt.ArrayLike,
    *,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapInterval:
    """Return the weighted agreement rate ``sum_m v_m a_m / M`` (``a_m`` is 1 when the judge and
    the person agree on label m, 0 otherwise, ``v_m`` its weight, :func:`lure_weights`) and its
    percentile interval over clusters (prompts).

    Each bootstrap round draws the C clusters with replacement (Efron & Tibshirani 1993, section
    8.5) and recomputes ``sum v a / sum 1`` over the labels of the clusters drawn, so the
    interval keeps a prompt's labels together; on all the data it is the unbiased LURE mean.
    With weights of 1 (uniform draws) it is the plain agreement rate.
    """
    a = np.asarray(agree, dtype=np.float64)
    v = np.asarray(weights, dtype=np.float64)
    codes, _ = _codes(np.asarray(clusters))
    if not a.shape == v.shape == codes.shape or a.ndim != 1:
        raise ValueError("agree, weights and clusters need one entry per label")
    if a.size == 0:
        nan = math.nan
        return BootstrapInterval(nan, nan, nan, confidence, rounds, seed, 0)
    return _cluster_ratio(v * a, np.ones(a.size), codes, rounds, confidence, seed)


def hajek_agreement(
    agree: npt.ArrayLike,
    propensity: npt.ArrayLike,
    clusters: npt.ArrayLike,
    *,
    compared: npt.ArrayLike | None = None,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapInterval:
    """Return the inverse-propensity (Hajek) weighted agreement rate of labels drawn with
    unequal, known probabilities, and its percentile interval over clusters (prompts).

    Formula: ``sum_m a_m / q_m  /  sum_m 1 / q_m``, with ``a_m`` in [0, 1] how far label m
    agrees (1 or 0, or the share of a judge's votes on the pair that name the person's label)
    and ``q_m`` the probability with which the draw that produced label m took its pair
    (Assignment.propensity). Each label is weighted by ``1 / q_m``, its Horvitz-Thompson weight
    (D. G. Horvitz & D. J. Thompson (1952), "A generalization of sampling without replacement
    from a finite universe", JASA 47:663-685); dividing by the sum of the weights instead of the
    pool size is J. Hajek's ratio estimator (1971, comment in "Foundations of Statistical
    Inference", Godambe & Sprott eds., p. 236; C.-E. Sarndal, B. Swensson & J. Wretman (1992),
    "Model Assisted Survey Sampling", section 5.7), consistent for the pool's mean agreement
    (each pair counted once) whatever positive proposal made the draws, and with equal
    propensities the plain agreement rate.

    ``compared``: how far each label enters the comparison at all, ``d_m`` in [0, 1] (1 when
    omitted), for a rate among some comparisons only: without ties, ``d_m`` is the share of the
    judge's votes on the pair that are not a tie (0 for a person's tie) and ``a_m`` the share
    that names the person's side, and the estimate ``sum a / q / sum d / q`` is the Hajek ratio
    of two pool totals, agreeing comparisons over comparisons made (Sarndal et al. 1992,
    section 5.6).

    Each bootstrap round draws the C clusters with replacement (Efron & Tibshirani 1993, section
    8.5) and takes the ratio of the drawn clusters' sums of ``a / q`` and of ``d / q``.
    """
    a = np.asarray(agree, dtype=np.float64)
    q = np.asarray(propensity, dtype=np.float64)
    d = np.ones(a.shape) if compared is None else np.asarray(compared, dtype=np.float64)
    codes, _ = _codes(np.asarray(clusters))
    if not a.shape == q.shape == d.shape == codes.shape or a.ndim != 1:
        raise ValueError("agree, propensity, compared and clusters need one entry per label")
    if ((q <= 0) | (q > 1) | np.isnan(q)).any():
        raise ValueError("each propensity must lie in (0, 1]")
    if a.size == 0 or not (d > 0).any():
        nan = math.nan
        return BootstrapInterval(nan, nan, nan, confidence, rounds, seed, 0)
    w = 1.0 / q
    return _cluster_ratio(w * a, w * d, codes, rounds, confidence, seed)


def agreement_strata(judge_tie: npt.ArrayLike, judge_disagreement: npt.ArrayLike) -> IntArray:
    """Return each pair's agreement stratum for :func:`poststratified_agreement`, from what the
    automatic judges said before any person labelled it: ``2 * tie + disputed``, with ``tie``
    whether the judge's own verdict on the pair is a tie (at least half its calls say tie) and
    ``disputed`` whether the judges' calls on the pair (every judge, both orders) disagree at
    all (``judge_disagreement > 0``, :func:`disagreement_share`). So 0: a decisive verdict every
    call shares; 1: a decisive verdict some call disputes (its other order, another judge);
    2: an undisputed tie; 3: a disputed tie (an inconsistent pair of orders counted as a tie).

    Why these: how often people side with a judge depends on them. On MT-Bench (GPT-4 against
    the 3,355 human votes) agreement with ties is 0.73 where GPT-4's two orders agree on a side,
    0.64 where they agree on a tie and 0.38 where they are inconsistent.
    """
    tie = np.asarray(judge_tie, dtype=bool)
    disputed = np.asarray(judge_disagreement, dtype=np.float64) > 0
    if tie.shape != disputed.shape:
        raise ValueError("judge_tie and judge_disagreement need one entry per pair")
    return (2 * tie.astype(np.intp) + disputed.astype(np.intp)).astype(np.intp)


# The floor of a stratum's standard deviation in :func:`neyman_priority`: a fifth of the largest
# a rate in [0, 1] can have (1/2), so a stratum whose labels so far all agree (or all disagree)
# is still sampled beyond the uniform share, and one estimate of its spread from few labels
# cannot switch it off.
NEYMAN_FLOOR = 0.1
# The stratum of a pair no judge voted on (:func:`judge_call_strata`): it has no agreement.
UNJUDGED = -1


def judge_call_strata(judge_counts: npt.ArrayLike) -> IntArray:
    """Return each pair's agreement stratum (:func:`agreement_strata`) from the collapsed
    verdicts of every judge call on it (``judge_counts``, pairs x (A, tie, B); all judges and
    both orders together): ``tie`` when at least half the calls say tie, ``disputed`` when the
    calls disagree at all (:func:`disagreement_share` above 0). A pair without a call is
    :data:`UNJUDGED` (-1). With one judge these are the report's strata for that judge."""
    counts = np.asarray(judge_counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != 3:
        raise ValueError("judge_counts must be a pairs x (A, tie, B) matrix")
    n = counts.sum(axis=1)
    strata = agreement_strata(counts[:, 1] >= n / 2, disagreement_share(counts))
    return np.where(n > 0, strata, UNJUDGED).astype(np.intp)


def neyman_priority(
    pair_strata: npt.ArrayLike,
    label_strata: npt.ArrayLike,
    label_agree: npt.ArrayLike,
    *,
    floor: float = NEYMAN_FLOOR,
) -> FloatArray:
    """Return each pair's priority for Neyman's allocation over agreement strata, in [0, 1].

    Formula: pair i of stratum h gets ``p_i = max(S_h, floor) / (1/2)``, with
    ``S_h = sqrt(pbar_h (1 - pbar_h))`` and ``pbar_h = (sum_{m in h} a_m + 1) / (n_h + 2)`` over
    the stratum's ``n_h`` labels so far (``label_strata``, ``label_agree``: ``a_m`` in [0, 1],
    how far label m agrees with the judge), so ``S_h`` is 1/2 before any label. A pair of
    stratum :data:`UNJUDGED` (no judge verdict, no agreement to estimate) gets the floor.

    Drawn by :func:`selection_probabilities`, the priority-proportional part of the draw takes
    stratum h with probability ``N_h p_h / sum_g N_g p_g``, in proportion to ``N_h S_h`` (its
    open pairs times its standard deviation), uniformly within it: Neyman's allocation, which
    minimises the variance of the stratified (post-stratified) mean for a given number of labels
    (J. Neyman (1934), "On the two different aspects of the representative method", JRSS
    97:558-625; W. G. Cochran (1977), "Sampling Techniques", 3rd ed., section 5.5). ``S_h`` is
    the Bernoulli standard deviation at the stratum's smoothed mean, an upper bound on the
    spread of any [0, 1] agreement with that mean (and its value for 0/1 agreement). The floor
    (and the uniform share of the draw) keeps every pair's propensity positive, so the
    inverse-propensity weights stay valid; the scale (dividing by 1/2) does not change the draw.
    """
    pairs = np.asarray(pair_strata, dtype=np.intp)
    seen = np.asarray(label_strata, dtype=np.intp)
    agree = np.asarray(label_agree, dtype=np.float64)
    if pairs.ndim != 1 or seen.shape != agree.shape or seen.ndim != 1:
        raise ValueError("pair_strata is one per pair; label_strata and label_agree one per label")
    if not 0.0 < floor <= 0.5:
        raise ValueError("floor must lie in (0, 1/2]: a zero floor can switch a stratum off")
    if ((agree < 0) | (agree > 1) | np.isnan(agree)).any():
        raise ValueError("label_agree must lie in [0, 1]")
    if (pairs < UNJUDGED).any() or (seen < 0).any():
        raise ValueError("strata are non-negative codes (UNJUDGED, -1, for pairs only)")
    size = int(max(pairs.max(initial=-1), seen.max(initial=-1))) + 1
    agreeing = np.bincount(seen, weights=agree, minlength=size)
    smoothed = (agreeing + 1.0) / (np.bincount(seen, minlength=size) + 2.0)
    spread = np.maximum(np.sqrt(smoothed * (1.0 - smoothed)), floor)
    per_pair = np.where(pairs >= 0, spread[np.maximum(pairs, 0)] if size else floor, floor)
    return np.asarray(np.clip(per_pair / 0.5, 0.0, 1.0), dtype=np.float64)


def poststratified_agreement(
    agree: npt.ArrayLike,
    weights: npt.ArrayLike,
    clusters: npt.ArrayLike,
    strata: npt.ArrayLike,
    *,
    pool_clusters: npt.ArrayLike,
    pool_strata: npt.ArrayLike,
    compared: npt.ArrayLike | None = None,
    rounds: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapInterval:
    """Return the post-stratified agreement rate of weighted labels and its percentile interval
    over clusters (prompts).

    Every item of the pool (a pair, or in a replay a vote) belongs to one stratum known before
    any person labels it (``pool_strata``, with its cluster ``pool_clusters``: for a judge, how
    its verdicts and the other judges' fall on the pair, see :func:`agreement_strata`); each
    label m has its agreement ``a_m`` in [0, 1], its weight ``w_m`` and its item's stratum and
    cluster. Formula:

        estimate = sum_h (K_h / K) * ybar_h,    ybar_h = sum_{m in h} w_m a_m / sum_{m in h} w_m

    with ``K_h`` the pool's items in stratum h and K all of them; a stratum without a label
    takes the Hajek mean of all the labels, ``sum w a / sum w``. This is the post-stratified
    estimator (D. Holt & T. M. F. Smith (1979), "Post stratification", JRSS A 142:33-46;
    C.-E. Sarndal, B. Swensson & J. Wretman (1992), "Model Assisted Survey Sampling", section
    7.6, with the Hajek ratio inside each stratum for unequal probabilities). Weights: ``1 / q``
    (Horvitz-Thompson, as :func:`hajek_agreement`) for the claim's draws, or the LURE weights of
    a replay's draws without replacement (:func:`lure_weights`, never negative). Whatever the
    weights, the ratio in each stratum is consistent for the stratum's mean (bias of order one
    over its labels), and the known shares ``K_h / K`` replace the shares the weights would give:
    what is left to sampling is the spread of agreement within strata, not between them, and a
    draw that favours some strata (judges disagreeing) no longer moves the stratum shares. With
    one stratum it is the weighted (Hajek) mean.

    ``compared`` (``d_m`` in [0, 1], 1 when omitted, as in :func:`hajek_agreement`) makes it a
    rate among the comparisons made, such as agreement without ties: the post-stratified ratio
    ``sum_h K_h abar_h / sum_h K_h dbar_h``, with ``abar_h`` and ``dbar_h`` the strata's Hajek
    means of ``a`` and of ``d`` (a stratum without labels takes the means of all labels);
    with ``d = 1`` it is the formula above.

    Each bootstrap round draws the pool's C clusters with replacement (Efron & Tibshirani 1993,
    section 8.5), clusters without labels included, and recomputes ``K_h``, the strata's ratios
    and the estimate from the clusters drawn.
    """
    a = np.asarray(agree, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    d = np.ones(a.shape) if compared is None else np.asarray(compared, dtype=np.float64)
    label_clusters = np.asarray(clusters)
    label_strata = np.asarray(strata)
    item_clusters = np.asarray(pool_clusters)
    item_strata = np.asarray(pool_strata)
    if not a.shape == w.shape == d.shape == label_clusters.shape == label_strata.shape:
        raise ValueError("agree, weights, compared, clusters and strata need one entry per label")
    if a.ndim != 1:
        raise ValueError("agree must be 1-D, one entry per label")
    if item_clusters.shape != item_strata.shape or item_clusters.ndim != 1:
        raise ValueError("pool_clusters and pool_strata need one entry per pool item")
    if ((w < 0) | np.isnan(w)).any():
        raise ValueError("weights must be non-negative")
    if a.size == 0 or (w * d).sum() == 0:
        nan = math.nan
        return BootstrapInterval(nan, nan, nan, confidence, rounds, seed, 0)
    cluster_codes, cluster_values = _codes(np.concatenate([item_clusters, label_clusters]))
    stratum_codes, stratum_values = _codes(np.concatenate([item_strata, label_strata]))
    if not np.isin(label_strata, item_strata).all():
        raise ValueError("every label's stratum must be a stratum of the pool")
    c, h = cluster_values.size, stratum_values.size
    items = item_clusters.size
    pool_cell = cluster_codes[:items] * h + stratum_codes[:items]
    label_cell = cluster_codes[items:] * h + stratum_codes[items:]
    # One row per cluster: K_ch, sum w a, sum w d and sum w per stratum, side by side.
    rows = np.column_stack(
        [
            np.bincount(pool_cell, minlength=c * h).reshape(c, h),
            np.bincount(label_cell, w * a, minlength=c * h).reshape(c, h),
            np.bincount(label_cell, w * d, minlength=c * h).reshape(c, h),
            np.bincount(label_cell, w, minlength=c * h).reshape(c, h),
        ]
    )
    estimate = float(_poststratified(rows.sum(axis=0)[None, :], h)[0])
    replicates = _poststratified(cluster_sums(rows, rounds=rounds, seed=seed), h)
    return percentile_interval(estimate, replicates, confidence=confidence, seed=seed, clusters=c)


def _poststratified(sums: FloatArray, strata: int) -> FloatArray:
    """The post-stratified estimate of each row of column sums ``[K_h..., sum w a...,
    sum w d..., sum w...]`` (see :func:`poststratified_agreement`)."""
    k, agreeing, compared, weight = (sums[:, i * strata : (i + 1) * strata] for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        total = weight.sum(axis=1)[:, None]
        labelled = weight > 0
        abar = np.where(labelled, agreeing / weight, agreeing.sum(axis=1)[:, None] / total)
        dbar = np.where(labelled, compared / weight, compared.sum(axis=1)[:, None] / total)
        return np.asarray((k * abar).sum(axis=1) / (k * dbar).sum(axis=1), dtype=np.float64)


def _cluster_ratio(
    numerator: FloatArray,
    denominator: FloatArray,
    codes: npt.NDArray[np.intp],
    rounds: int,
    confidence: float,
    seed: int,
) -> BootstrapInterval:
    """``sum numerator / sum denominator`` and its percentile interval over the clusters
    (``codes``): each round the ratio of the drawn clusters' sums (Efron & Tibshirani 1993,
    section 8.5)."""
    c = int(codes.max()) + 1
    rows = np.column_stack([np.bincount(codes, numerator, c), np.bincount(codes, denominator, c)])
    estimate = float(rows[:, 0].sum() / rows[:, 1].sum())
    sums = cluster_sums(rows, rounds=rounds, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        replicates = sums[:, 0] / sums[:, 1]
    return percentile_interval(estimate, replicates, confidence=confidence, seed=seed, clusters=c)


def _codes(values: npt.NDArray[np.generic]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.generic]]:
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1).astype(np.intp), uniques
