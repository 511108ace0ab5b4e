"""Single-answer grades: a system's mean grade with an interval over prompts (MT-Bench's table).

MT-Bench (Zheng et al. 2023, "Judging LLM-as-a-judge with MT-Bench and Chatbot Arena") reports
each model's mean single-answer grade (1-10) per category and overall. Here the mean comes with
a percentile bootstrap interval whose rounds draw prompts: the grades of one prompt share its
difficulty, so they are not independent draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.stats.bootstrap import cluster_sums, percentile_interval


@dataclass(frozen=True)
class MeanGrade:
    """A mean grade of ``grades`` grades on ``prompts`` prompts and its interval.

    ``lower``/``upper`` are None with fewer than two clusters to resample; ``resampled`` says
    what a round drew ("prompt", or "grade" when each grade is its own cluster).
    """

    mean: float | None
    lower: float | None
    upper: float | None
    grades: int
    prompts: int
    confidence: float
    resampled: str
    rounds: int


def mean_grade(
    grades: npt.ArrayLike,
    prompts: npt.ArrayLike,
    *,
    rounds: int,
    seed: int,
    by_prompt: bool = True,
    confidence: float = 0.95,
) -> MeanGrade:
    """The mean of ``grades`` with a percentile interval over their prompts.

    Formula: mean = sum_i g_i / n. Interval: the cluster bootstrap of a ratio estimator
    (B. Efron & R. Tibshirani 1993, "An Introduction to the Bootstrap", section 8.5): with each
    prompt's row [sum of its grades, number of its grades], a round draws the C prompts C times
    with replacement (:func:`leaderboard.stats.bootstrap.cluster_sums`, seeded) and takes the
    ratio of the drawn sums; the interval is the rounds' percentiles
    (:func:`leaderboard.stats.bootstrap.percentile_interval`). With ``by_prompt`` False every
    grade is its own cluster (a plain bootstrap of the mean). Fewer than two clusters: no
    interval.
    """
    import pandas as pd

    values = np.asarray(grades, dtype=np.float64)
    labels = np.asarray(prompts)
    if values.ndim != 1 or labels.shape != values.shape:
        raise ValueError("need one prompt per grade")
    if np.isnan(values).any():
        raise ValueError("a grade is missing (NaN)")
    n_prompts = int(pd.unique(labels).size) if labels.size else 0
    resampled = "prompt" if by_prompt else "grade"
    if values.size == 0:
        return MeanGrade(None, None, None, 0, 0, confidence, resampled, 0)
    mean = float(values.mean())
    codes = pd.factorize(labels)[0] if by_prompt else np.arange(values.size)
    clusters = int(codes.max()) + 1
    if clusters < 2:
        return MeanGrade(mean, None, None, int(values.size), n_prompts, confidence, resampled, 0)
    rows = np.zeros((clusters, 2))
    np.add.at(rows[:, 0], codes, values)
    np.add.at(rows[:, 1], codes, 1.0)
    sums = cluster_sums(rows, rounds=rounds, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        replicates = sums[:, 0] / sums[:, 1]
    interval = percentile_interval(
        mean, replicates, confidence=confidence, seed=seed, clusters=clusters
    )
    return MeanGrade(
        mean,
        interval.lower,
        interval.upper,
        int(values.size),
        n_prompts,
        confidence,
        resampled,
        rounds,
    )
