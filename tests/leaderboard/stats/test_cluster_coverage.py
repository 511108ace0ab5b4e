"""The intervals over prompts cover the truth on studies whose prompts differ; Wilson's over
votes does not (issue 25, part 3).

Each simulated study has C prompts; prompt c's chance that a vote is a hit (a vote for the
answer shown first, for the longer answer, a correct vote on a gold pair) is
p_c = expit(mu + sigma z_c), z_c standard normal, and it gets m votes. The share the report
estimates is sum(hits) / sum(votes), whose target with m votes on every prompt is
E[p] = E[expit(mu + sigma Z)], computed by Gauss-Hermite quadrature.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from leaderboard.stats.bootstrap import cluster_share
from leaderboard.stats.proportion import wilson_interval

MU, SIGMA = 0.6, 1.4
STUDIES, PROMPTS, VOTES = 400, 40, 12


def true_share(mu: float, sigma: float) -> float:
    """E[expit(mu + sigma Z)] for a standard normal Z, by 80-point Gauss-Hermite quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float((weights * expit(mu + sigma * nodes)).sum() / weights.sum())


def simulate(seed: int) -> tuple[float, float]:
    """The share of the 95% prompt-bootstrap and Wilson intervals that cover the truth."""
    rng = np.random.default_rng(seed)
    truth = true_share(MU, SIGMA)
    covered_prompts = covered_wilson = 0
    prompt_of_vote = np.repeat(np.arange(PROMPTS), VOTES)
    for study in range(STUDIES):
        p = expit(MU + SIGMA * rng.standard_normal(PROMPTS))
        hits = rng.random((PROMPTS, VOTES)) < p[:, None]
        flat = hits.ravel()
        by_prompt = cluster_share(
            flat.astype(np.int64),
            np.ones(flat.size, dtype=np.int64),
            prompt_of_vote,
            unit="vote",
            resampled="prompt",
            rounds=400,
            seed=study,
        )
        assert by_prompt.lower is not None and by_prompt.upper is not None
        covered_prompts += by_prompt.lower <= truth <= by_prompt.upper
        wilson = wilson_interval(int(flat.sum()), int(flat.size), 0.95)
        assert wilson.lower is not None and wilson.upper is not None
        covered_wilson += wilson.lower <= truth <= wilson.upper
    return covered_prompts / STUDIES, covered_wilson / STUDIES


def test_the_quadrature_truth_matches_a_large_sample() -> None:
    rng = np.random.default_rng(0)
    sample = expit(MU + SIGMA * rng.standard_normal(2_000_000)).mean()
    assert true_share(MU, SIGMA) == pytest.approx(sample, abs=1e-3)


def test_intervals_over_prompts_cover_the_truth_and_wilson_over_votes_does_not() -> None:
    over_prompts, wilson = simulate(seed=25)
    # 400 studies: a 95% interval's coverage lies within about 2 points of 0.95 by chance; the
    # percentile bootstrap over 40 prompts runs a little short, so "a few points".
    assert 0.91 <= over_prompts <= 0.98
    # Votes of one prompt share its p_c (intra-prompt correlation about 0.25 here): Wilson's
    # interval treats 480 votes as independent and is about half as wide as it should be.
    assert wilson < 0.75


def test_a_tie_worth_half_a_hit_gives_the_exact_share_over_its_prompts() -> None:
    # One correct vote, one tie (half), one wrong vote on two prompts: (1 + 0.5 + 0) / 3.
    share = cluster_share(
        [1.0, 0.5, 0.0], [1, 1, 1], [7, 7, 8], unit="vote", resampled="prompt", rounds=50, seed=0
    )
    assert share.share == pytest.approx(0.5)
    assert (share.total, share.clusters) == (3, 2)
