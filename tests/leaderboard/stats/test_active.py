import itertools
import math

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.active import (
    UNJUDGED,
    PriorityWeights,
    agreement_strata,
    category_under_coverage,
    disagreement_share,
    hajek_agreement,
    interval_overlap,
    judge_call_strata,
    lure_weights,
    neyman_priority,
    pair_priority,
    poststratified_agreement,
    selection_probabilities,
    weighted_agreement,
)
from leaderboard.stats.replay import Policy, ReplayPool, labels_to_reach, replay_curve, replay_order


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([3, 0, 0], 0.0),  # unanimous
        ([1, 0, 1], 1.0),  # two labels split: as split as two labels can be
        ([2, 0, 1], 1.0 / 3.0 / (1.0 - 1.0 / 3.0)),  # modal share 2/3; floor 1/3 -> 0.5
        ([1, 1, 1], 1.0),  # three labels over three categories, all different
        ([2, 1, 1], (1 - 2 / 4) / (1 - 2 / 4)),  # modal 2 of 4 is the floor ceil(4/3)/4
        ([1, 0, 0], 0.0),  # one label shows no disagreement
        ([0, 0, 0], 0.0),
    ],
)
def test_disagreement_share_is_zero_when_unanimous_and_one_when_as_split_as_possible(
    counts: list[int], expected: float
) -> None:
    assert disagreement_share([counts])[0] == pytest.approx(expected)


def test_disagreement_share_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        disagreement_share([[1, -1, 0]])


def test_interval_overlap_is_the_intersection_over_the_shorter_interval() -> None:
    overlap = interval_overlap(
        [0.0, 0.0, 0.0, 0.0, np.nan],
        [2.0, 2.0, 2.0, 1.0, 1.0],
        [1.0, 3.0, 0.5, 0.0, 0.0],
        [5.0, 4.0, 1.0, 1.0, 1.0],
    )
    # [0,2]&[1,5]: 1 of the shorter 2; disjoint; [0.5,1] inside [0,2]; identical; unknown end.
    np.testing.assert_allclose(overlap, [0.5, 0.0, 1.0, 1.0, 1.0])


def test_points_overlap_only_when_they_coincide() -> None:
    np.testing.assert_allclose(interval_overlap([1, 1], [1, 1], [1, 2], [1, 2]), [1.0, 0.0])


def test_a_category_below_the_studys_labels_per_pair_is_under_covered() -> None:
    # Study: 12 labels on 6 pairs = 2 per pair. Category x: 3 pairs, 9 labels (3 per pair);
    # y: 2 pairs, 3 labels (1.5 per pair: 1 - 1.5/2 = 0.25 short); z: no label (1.0 short).
    labels = [3, 3, 3, 2, 1, 0]
    categories = ["x", "x", "x", "y", "y", "z"]
    np.testing.assert_allclose(
        category_under_coverage(labels, categories), [0, 0, 0, 0.25, 0.25, 1.0]
    )
    np.testing.assert_allclose(category_under_coverage([0, 0], ["x", "y"]), [0, 0])


def test_priority_is_the_weighted_mean_of_its_terms() -> None:
    terms = {
        "judge_disagreement": [1.0, 0.0],
        "interval_overlap": [0.5, 0.0],
        "human_disagreement": [0.0, 1.0],
        "under_coverage": [0.0, 0.0],
    }
    weights = PriorityWeights(judge_disagreement=2.0, interval_overlap=1.0, human_disagreement=1.0)
    np.testing.assert_allclose(pair_priority(terms, weights), [(2 + 0.5) / 5, 1 / 5])


def test_priority_refuses_a_term_out_of_range_and_weights_that_are_all_zero() -> None:
    terms = {t: [0.5] for t in PriorityWeights().as_dict()}
    with pytest.raises(ValueError, match="interval_overlap must lie in"):
        pair_priority({**terms, "interval_overlap": [1.5]}, PriorityWeights())
    zero = PriorityWeights(0.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="not all zero"):
        pair_priority(terms, zero)


def test_every_open_pair_keeps_the_random_share_of_a_chance() -> None:
    q = selection_probabilities([0.0, 0.0, 1.0, 3.0], random_share=0.2)
    np.testing.assert_allclose(q, [0.05, 0.05, 0.05 + 0.8 / 4, 0.05 + 0.8 * 3 / 4])
    assert q.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(selection_probabilities([0.0, 0.0]), [0.5, 0.5])
    with pytest.raises(ValueError, match="random_share"):
        selection_probabilities([1.0], random_share=0.0)


def test_uniform_draws_get_weight_one() -> None:
    n = 7
    q = 1.0 / (n - np.arange(5))
    np.testing.assert_allclose(lure_weights(q, n), np.ones(5))


def test_the_lure_mean_is_unbiased_for_any_proposal_by_exact_enumeration() -> None:
    # Every ordered draw of M = 3 from N = 5 items, each drawn in proportion to fixed scores
    # among the items still open: the expectation of (1/M) sum v_m L_m is the pool's mean.
    values = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    scores = np.array([0.5, 0.1, 0.2, 0.9, 0.3])
    n, m = 5, 3
    expected = 0.0
    for draw in itertools.permutations(range(n), m):
        probability, propensities, open_ = 1.0, [], list(range(n))
        for item in draw:
            q = scores[item] / scores[open_].sum()
            probability *= q
            propensities.append(q)
            open_.remove(item)
        expected += probability * float(np.mean(lure_weights(propensities, n) * values[[*draw]]))
    assert expected == pytest.approx(values.mean(), abs=1e-12)
    # The plain mean of the same draws is biased toward the often-drawn zero at index 3.
    biased = 0.0
    for draw in itertools.permutations(range(n), m):
        probability, open_ = 1.0, list(range(n))
        for item in draw:
            probability *= scores[item] / scores[open_].sum()
            open_.remove(item)
        biased += probability * float(np.mean(values[[*draw]]))
    assert abs(biased - values.mean()) > 0.02


def test_lure_weights_refuse_a_zero_propensity_or_too_many_draws() -> None:
    with pytest.raises(ValueError, match="propensity"):
        lure_weights([0.5, 0.0], 4)
    with pytest.raises(ValueError, match="more draws"):
        lure_weights([0.5, 0.5, 0.5], 2)


def test_weighted_agreement_with_unit_weights_is_the_plain_rate_with_a_prompt_interval() -> None:
    agree = [1, 1, 0, 1, 0, 0, 1, 1]
    prompts = ["p1", "p1", "p2", "p2", "p3", "p3", "p4", "p4"]
    interval = weighted_agreement(agree, np.ones(8), prompts, rounds=2000, seed=3)
    assert interval.estimate == pytest.approx(5 / 8)
    assert interval.clusters == 4
    assert interval.lower < 5 / 8 < interval.upper
    # A round draws whole prompts: the rates it can give are sums of per-prompt pairs, so no
    # replicate falls outside the prompts' own range of rates (0 to 1).
    assert interval.lower >= 0.0 and interval.upper <= 1.0


def _simulated_pool(rng: np.random.Generator, prompts: int = 60) -> pd.DataFrame:
    """A study with known truth: per prompt an agreement rate drawn from Beta(4, 2), 3 units a
    prompt, 2-4 votes a unit; GPT-like judge disagreement on a third of the units, where the
    judge agrees with people less often (so priority and agreement are related)."""
    rows = []
    systems = ["s1", "s2", "s3", "s4"]
    for p in range(prompts):
        rate = rng.beta(4, 2)
        for u in range(3):
            a, b = rng.choice(systems, size=2, replace=False)
            a, b = sorted((a, b))
            disputed = rng.random() < 1 / 3
            judge = rng.choice(["A", "tie", "B"])
            for _ in range(rng.integers(2, 5)):
                agree = rng.random() < (rate * (0.5 if disputed else 1.0))
                label = judge if agree else rng.choice([x for x in ("A", "tie", "B") if x != judge])
                rows.append(
                    {
                        "unit": f"{p}-{u}",
                        "prompt": p,
                        "category": ["c1", "c2", "c3"][p % 3],
                        "system_a": a,
                        "system_b": b,
                        "label": label,
                        "judge_label": judge,
                        "judge_disagreement": 1.0 if disputed else 0.0,
                    }
                )
    return pd.DataFrame(rows)


def test_active_order_agreement_is_unbiased_for_the_pools_agreement_over_many_replays() -> None:
    rng = np.random.default_rng(11)
    frame = _simulated_pool(rng, prompts=40)
    pool = ReplayPool(frame)
    truth = float((frame["label"] == frame["judge_label"]).mean())
    n = len(pool)
    size = n // 3
    estimates, naive = [], []
    for seed in range(40):
        order, propensity = replay_order(
            pool, policy="active", seed=seed, refresh=40, overlap_rounds=10
        )
        curve = replay_curve(
            pool, order, propensity, policy="active", seed=seed, sizes=[size], rounds=50
        )
        estimates.append(curve.points[0].agreement)
        rows = order[:size]
        naive.append(float((frame["label"].iloc[rows] == frame["judge_label"].iloc[rows]).mean()))
    # The LURE mean centres on the truth (its standard error over 40 replays is about 0.01);
    # the unweighted rate of the same labels leans toward the disputed units active selection
    # prefers, where the judge agrees less.
    assert np.mean(estimates) == pytest.approx(truth, abs=0.02)
    assert np.mean(naive) < truth - 0.02


def test_the_active_order_prefers_disputed_units_and_the_random_order_does_not() -> None:
    rng = np.random.default_rng(5)
    frame = _simulated_pool(rng)
    pool = ReplayPool(frame)
    disputed = frame["judge_disagreement"].to_numpy() == 1.0
    size = len(pool) // 4
    active, _ = replay_order(pool, policy="active", seed=0, refresh=20)
    uniform, propensity = replay_order(pool, policy="random", seed=0)
    np.testing.assert_allclose(lure_weights(propensity, len(pool)), 1.0)
    assert disputed[active[:size]].mean() > disputed.mean() + 0.1
    assert abs(disputed[uniform[:size]].mean() - disputed.mean()) < 0.1
    assert sorted(active) == list(range(len(pool)))  # every label is revealed once


def test_a_replay_curve_ends_on_the_whole_pool_for_either_order() -> None:
    rng = np.random.default_rng(2)
    frame = _simulated_pool(rng, prompts=24)
    pool = ReplayPool(frame)
    n = len(pool)
    truth = float((frame["label"] == frame["judge_label"]).mean())
    ends = []
    for policy in ("random", "active"):
        order, propensity = replay_order(pool, policy=policy, seed=1)
        curve = replay_curve(
            pool, order, propensity, policy=policy, seed=1, sizes=[n // 2, n], rounds=200
        )
        last = curve.points[-1]
        assert last.agreement == pytest.approx(truth)
        assert last.kendall_tau == pytest.approx(1.0)
        ends.append(last.width)
    assert ends[0] == pytest.approx(ends[1])  # all labels, the same data, the same interval
    assert labels_to_reach(curve, ends[0]) == n
    assert labels_to_reach(curve, -1.0) is None


def test_a_pool_with_a_label_outside_a_tie_b_is_refused() -> None:
    frame = _simulated_pool(np.random.default_rng(0), prompts=3)
    frame.loc[0, "label"] = "model_a"
    with pytest.raises(ValueError, match="labels must be A, tie or B"):
        ReplayPool(frame)


def test_an_empty_weighted_agreement_is_nan() -> None:
    interval = weighted_agreement([], [], [], rounds=10)
    assert math.isnan(interval.estimate)


def test_the_hajek_agreement_of_a_hand_example_weights_each_label_by_one_over_its_propensity() -> (
    None
):
    result = hajek_agreement([1, 0, 1], [0.5, 0.25, 0.25], ["p1", "p1", "p2"], rounds=50)
    # (1/0.5 + 0 + 1/0.25) / (1/0.5 + 1/0.25 + 1/0.25) = 6 / 10
    assert result.estimate == pytest.approx(0.6)
    plain = hajek_agreement([1, 0, 1, 1], [0.1] * 4, ["a", "b", "c", "d"], rounds=50)
    assert plain.estimate == pytest.approx(0.75)
    with pytest.raises(ValueError, match="propensity"):
        hajek_agreement([1], [0.0], ["a"])


def test_the_hajek_agreement_of_a_simulated_active_study_is_unbiased_and_covers_the_truth() -> None:
    """A pool of 600 pairs on 120 prompts, pair i agreeing with probability t_i; the priority
    is highest where agreement is lowest (as judge disagreement makes it), and 400 labels are
    drawn at q_i = e / N + (1 - e) p_i / sum p (e = 0.2). The truth is the pool's mean t."""
    rng = np.random.default_rng(20261203)
    n, labels, share, repeats = 600, 400, 0.2, 200
    prompt = np.repeat(np.arange(120), 5)
    truth_p = rng.beta(2, 1, size=n)
    priority = 1.05 - truth_p
    q = share / n + (1 - share) * priority / priority.sum()
    truth = float(truth_p.mean())
    estimates, plain, covered = [], [], 0
    for seed in range(repeats):
        draw = np.random.default_rng(seed)
        picked = draw.choice(n, size=labels, p=q / q.sum())
        agree = (draw.random(labels) < truth_p[picked]).astype(float)
        result = hajek_agreement(agree, q[picked], prompt[picked], rounds=400, seed=seed)
        estimates.append(result.estimate)
        plain.append(agree.mean())
        covered += result.lower <= truth <= result.upper
    estimates_a = np.array(estimates)
    standard_error = estimates_a.std(ddof=1) / np.sqrt(repeats)
    # Unbiased within sampling error: the mean of 200 estimates within 3 standard errors.
    assert abs(estimates_a.mean() - truth) < 3 * standard_error
    # 95% intervals cover the truth in most repetitions (a binomial 95% of 200 is 190 +- 6).
    assert covered / repeats >= 0.88
    # Unweighted, the same labels are far off: the active draw favours disagreeing pairs.
    assert truth - np.mean(plain) > 10 * standard_error


def test_agreement_strata_split_the_judges_tie_from_decisive_and_disputed_from_unanimous() -> None:
    strata = agreement_strata([False, False, True, True], [0.0, 0.5, 0.0, 1.0])
    assert strata.tolist() == [0, 1, 2, 3]


def test_the_poststratified_agreement_weighs_each_strata_mean_by_its_share_of_the_pool() -> None:
    # Pool: 6 items, 4 in stratum 0 and 2 in stratum 1 (so shares 2/3 and 1/3). Labels: in
    # stratum 0, 1 (weight 1) and 0 (weight 3): mean 1/4; in stratum 1, 1 (weight 2): mean 1.
    result = poststratified_agreement(
        [1, 0, 1],
        [1, 3, 2],
        ["p1", "p2", "p2"],
        [0, 0, 1],
        pool_clusters=["p1", "p1", "p2", "p2", "p2", "p3"],
        pool_strata=[0, 0, 0, 1, 1, 0],
        rounds=50,
    )
    assert result.estimate == pytest.approx(2 / 3 * 1 / 4 + 1 / 3 * 1)
    assert result.clusters == 3  # p3 has no label and is still drawn
    # A stratum without a label takes the Hajek mean of all labels: (1 + 2) / 6.
    lone = poststratified_agreement(
        [1, 0, 1], [1, 3, 2], ["p1", "p2", "p2"], [0, 0, 0],
        pool_clusters=["p1", "p2", "p3"], pool_strata=[0, 0, 1], rounds=50,
    )  # fmt: skip
    assert lone.estimate == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="stratum of the pool"):
        poststratified_agreement([1], [1], ["p1"], [5], pool_clusters=["p1"], pool_strata=[0])


def test_poststratified_agreement_of_a_simulated_study_is_unbiased_covers_and_is_narrower() -> None:
    """600 pairs on 120 prompts in four strata whose agreement differs (0.85, 0.65, 0.55, 0.35),
    pair i agreeing with probability t_i around its stratum's; the priority is highest in the
    disputed strata, where agreement is lowest, and 400 labels are drawn at q_i = e / N + (1 - e)
    p_i / sum p (e = 0.2), as the claim draws them. The truth is the pool's mean t."""
    rng = np.random.default_rng(20261204)
    n, labels, share, repeats = 600, 400, 0.2, 200
    prompt = np.repeat(np.arange(120), 5)
    stratum = rng.choice(4, size=n, p=[0.6, 0.1, 0.1, 0.2])
    truth_p = np.clip(np.array([0.85, 0.65, 0.55, 0.35])[stratum] + rng.normal(0, 0.1, n), 0, 1)
    priority = np.array([0.1, 0.6, 0.5, 1.0])[stratum]
    q = share / n + (1 - share) * priority / priority.sum()
    truth = float(truth_p.mean())
    post, hajek, covered = [], [], 0
    widths = np.zeros((repeats, 2))
    for seed in range(repeats):
        draw = np.random.default_rng(seed)
        picked = draw.choice(n, size=labels, p=q / q.sum())
        agree = (draw.random(labels) < truth_p[picked]).astype(float)
        result = poststratified_agreement(
            agree, 1 / q[picked], prompt[picked], stratum[picked],
            pool_clusters=prompt, pool_strata=stratum, rounds=400, seed=seed,
        )  # fmt: skip
        plain = hajek_agreement(agree, q[picked], prompt[picked], rounds=400, seed=seed)
        post.append(result.estimate)
        hajek.append(plain.estimate)
        covered += result.lower <= truth <= result.upper
        widths[seed] = (result.upper - result.lower, plain.upper - plain.lower)
    post_a = np.array(post)
    standard_error = post_a.std(ddof=1) / np.sqrt(repeats)
    assert abs(post_a.mean() - truth) < 3 * standard_error
    assert covered / repeats >= 0.88
    # Known strata shares take the stratum mix out of the sampling error: narrower intervals
    # and a smaller spread of estimates than the Hajek mean of the same labels.
    # The strata explain about a fifth of the agreement's variance here (seeded: the ratios
    # are 0.94 and 0.93); the between-prompt spread of the pool itself stays in both.
    assert widths[:, 0].mean() < 0.97 * widths[:, 1].mean()
    assert post_a.std() < 0.97 * np.std(hajek)


def test_judge_call_strata_pool_every_call_and_set_unjudged_pairs_apart() -> None:
    # Calls (A, tie, B): unanimous A; A and B; two ties of three; tie and B; none.
    strata = judge_call_strata([[3, 0, 0], [1, 0, 1], [1, 2, 0], [0, 1, 1], [0, 0, 0]])
    assert strata.tolist() == [0, 1, 3, 3, UNJUDGED]


def test_the_neyman_priority_of_hand_made_strata_allocates_draws_by_size_times_spread() -> None:
    """Five strata of known sizes and labels, so known standard deviations S_h: 10 pairs whose
    6 labels agree 3 times (pbar = 4/8, S = 1/2); 30 pairs, 8 of 8 (pbar = 9/10, S = 0.3);
    20 pairs, 98 of 98 (pbar = 99/100, S = 0.0995: the floor 0.1); 5 pairs without a label
    (S = 1/2); 5 unjudged pairs (the floor). The priority-proportional part of the draw takes
    each stratum in proportion to N_h max(S_h, floor), and every pair keeps the uniform share."""
    sizes = [10, 30, 20, 5, 5]
    pair_strata = np.repeat([0, 1, 2, 3, UNJUDGED], sizes)
    label_strata = np.repeat([0, 1, 2], [6, 8, 98])
    label_agree = np.concatenate([[1, 0, 1, 0, 1, 0], np.ones(8), np.ones(98)])
    priority = neyman_priority(pair_strata, label_strata, label_agree)
    spread = np.array([0.5, 0.3, 0.1, 0.5, 0.1])
    assert priority.tolist() == pytest.approx(np.repeat(spread / 0.5, sizes).tolist())
    share = 0.2
    q = selection_probabilities(priority, random_share=share)
    codes = np.repeat(np.arange(5), sizes)
    per_stratum = np.bincount(codes, weights=q)
    neyman = np.array(sizes) * spread / (np.array(sizes) * spread).sum()
    # N_h S_h: 5, 9, 2, 2.5, 0.5 of 19.
    assert neyman.tolist() == pytest.approx([5 / 19, 9 / 19, 2 / 19, 2.5 / 19, 0.5 / 19])
    assert per_stratum.tolist() == pytest.approx(
        (share * np.array(sizes) / 70 + (1 - share) * neyman).tolist()
    )
    assert q.min() >= share / 70
    # A label's agreement may be a share (of a judge's votes): 1/3 and 2/3 give pbar = 1/2.
    halves = neyman_priority([0, 0], [0, 0], [1 / 3, 2 / 3])
    assert halves.tolist() == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="floor"):
        neyman_priority([0], [0], [1.0], floor=0.0)
    with pytest.raises(ValueError, match="label_agree"):
        neyman_priority([0], [0], [1.5])


def test_agreement_under_adaptive_neyman_draws_is_unbiased_and_covers_the_truth() -> None:
    """The live design on a simulated study with known truth: 600 pairs on 120 prompts in four
    strata (agreement around 0.85, 0.65, 0.55, 0.35), 400 labels drawn 50 at a time at q_i = e /
    N + (1 - e) p_i / sum p (e = 0.2) with p the Neyman priority of the labels drawn so far
    (recomputed before each batch, as the analysis worker does between claims), each label
    keeping the q of its draw as the claim records it. Both of the report's estimators, the
    Hajek mean and the post-stratified one, centre on the pool's mean agreement and their 95%
    intervals cover it."""
    rng = np.random.default_rng(20261204)
    n, labels, batch, share, repeats = 600, 400, 50, 0.2, 200
    prompt = np.repeat(np.arange(120), 5)
    stratum = rng.choice(4, size=n, p=[0.6, 0.1, 0.1, 0.2])
    truth_p = np.clip(np.array([0.85, 0.65, 0.55, 0.35])[stratum] + rng.normal(0, 0.1, n), 0, 1)
    truth = float(truth_p.mean())
    results: dict[str, list[float]] = {"hajek": [], "post": []}
    covered = {"hajek": 0, "post": 0}
    for seed in range(repeats):
        draw = np.random.default_rng(seed)
        picked = np.empty(0, dtype=np.intp)
        agree = np.empty(0)
        q_drawn = np.empty(0)
        while picked.size < labels:
            priority = neyman_priority(stratum, stratum[picked], agree)
            q = selection_probabilities(priority, random_share=share)
            more = draw.choice(n, size=batch, p=q)
            picked = np.concatenate([picked, more])
            agree = np.concatenate([agree, (draw.random(batch) < truth_p[more]).astype(float)])
            q_drawn = np.concatenate([q_drawn, q[more]])
        hajek = hajek_agreement(agree, q_drawn, prompt[picked], rounds=400, seed=seed)
        post = poststratified_agreement(
            agree, 1 / q_drawn, prompt[picked], stratum[picked],
            pool_clusters=prompt, pool_strata=stratum, rounds=400, seed=seed,
        )  # fmt: skip
        for name, result in (("hajek", hajek), ("post", post)):
            results[name].append(result.estimate)
            covered[name] += result.lower <= truth <= result.upper
    for name in results:
        estimates = np.array(results[name])
        standard_error = estimates.std(ddof=1) / np.sqrt(repeats)
        assert abs(estimates.mean() - truth) < 3 * standard_error, name
        assert covered[name] / repeats >= 0.88, name


def test_capped_draws_with_stale_propensities_stay_unbiased_when_post_stratified() -> None:
    """The claim's real draw: 600 pairs of overlap 3 on 120 prompts in four strata, 600 labels;
    each draw takes an open pair (fewer than 3 labels) at e / k' + (1 - e) p / W' over the pairs
    open now, but records e / k + (1 - e) p / W with the pool k and total W of the last
    recompute, made every 100 labels (the priorities fixed Neyman ones). Within a stratum every
    pair has the same recorded propensity at a recompute, and the pairs that fill are a random
    subset of it, so the post-stratified estimate centres on the truth and covers it, though
    pairs fill and the recorded propensities are stale."""
    rng = np.random.default_rng(20261205)
    n, overlap, labels, refresh, share, repeats = 600, 3, 600, 100, 0.2, 200
    prompt = np.repeat(np.arange(120), 5)
    stratum = rng.choice(4, size=n, p=[0.6, 0.1, 0.1, 0.2])
    truth_p = np.clip(np.array([0.85, 0.65, 0.55, 0.35])[stratum] + rng.normal(0, 0.1, n), 0, 1)
    priority = np.array([0.2, 0.6, 0.8, 1.0])[stratum]
    truth = float(truth_p.mean())
    estimates, covered = [], 0
    for seed in range(repeats):
        draw = np.random.default_rng(seed)
        taken = np.zeros(n, dtype=np.intp)
        picked = np.empty(labels, dtype=np.intp)
        recorded = np.empty(labels)
        for m in range(labels):
            open_ = taken < overlap
            if m % refresh == 0:
                pool, total = open_.sum(), priority[open_].sum()
            now = np.where(
                open_, share / open_.sum() + (1 - share) * priority / priority[open_].sum(), 0
            )
            i = int(draw.choice(n, p=now / now.sum()))
            picked[m], recorded[m] = i, share / pool + (1 - share) * priority[i] / total
            taken[i] += 1
        agree = (draw.random(labels) < truth_p[picked]).astype(float)
        result = poststratified_agreement(
            agree, 1 / recorded, prompt[picked], stratum[picked],
            pool_clusters=prompt, pool_strata=stratum, rounds=200, seed=seed,
        )  # fmt: skip
        estimates.append(result.estimate)
        covered += result.lower <= truth <= result.upper
    estimates_a = np.array(estimates)
    standard_error = estimates_a.std(ddof=1) / np.sqrt(repeats)
    assert abs(estimates_a.mean() - truth) < 3 * standard_error
    assert covered / repeats >= 0.88


@pytest.mark.parametrize("policy", ["active", "neyman", "live"])
def test_the_poststratified_replay_estimate_centres_on_the_pools_agreement(policy: Policy) -> None:
    rng = np.random.default_rng(11)
    frame = _simulated_pool(rng, prompts=40)
    pool = ReplayPool(frame)
    truth = float((frame["label"] == frame["judge_label"]).mean())
    n = len(pool)
    estimates = []
    for seed in range(40):
        order, propensity = replay_order(
            pool, policy=policy, seed=seed, refresh=40, overlap_rounds=10
        )
        curve = replay_curve(
            pool, order, propensity, policy=policy, seed=seed,
            sizes=[n // 3, n], rounds=50, estimator="poststratified",
        )  # fmt: skip
        estimates.append(curve.points[0].agreement)
        assert curve.points[-1].agreement == pytest.approx(truth)  # all labels: the pool's rate
        assert sorted(order) == list(range(n))
    # 40 replays: the standard error of the mean estimate is about 0.01.
    assert np.mean(estimates) == pytest.approx(truth, abs=0.02)


def test_the_neyman_order_favours_the_strata_whose_agreement_is_most_uncertain() -> None:
    # Two strata: decisive undisputed units where people always side with the judge (sd 0)
    # and disputed ones where they do so half the time (sd 1/2): the Neyman draw takes the
    # disputed ones first; the random share still reaches the others.
    frame = _simulated_pool(np.random.default_rng(3), prompts=60)
    disputed = frame["judge_disagreement"].to_numpy() == 1.0
    frame.loc[~disputed, "label"] = frame.loc[~disputed, "judge_label"]
    frame.loc[disputed, "judge_label"] = "A"
    frame.loc[disputed, "label"] = np.where(np.arange(disputed.sum()) % 2 == 0, "A", "B")
    pool = ReplayPool(frame)
    order, _ = replay_order(pool, policy="neyman", seed=0, refresh=20)
    first = order[: len(pool) // 4]
    assert disputed[first].mean() > disputed.mean() + 0.1
    assert (~disputed[first]).any()


def test_without_ties_the_weighted_rates_count_only_the_comparisons_made() -> None:
    # Three votes: agrees on a fully compared pair (q 0.5), a person's tie (no comparison,
    # q 0.25), a side compared with half of the judge's votes and agreeing with that half (q 0.2).
    agree, compared, q = [1.0, 0.0, 0.5], [1.0, 0.0, 0.5], [0.5, 0.25, 0.2]
    hajek = hajek_agreement(agree, q, ["p1", "p1", "p2"], compared=compared, rounds=50)
    assert hajek.estimate == pytest.approx((2 + 2.5) / (2 + 2.5))
    disagree = hajek_agreement([0.0, 0.0, 0.5], q, ["p1", "p1", "p2"], compared=compared)
    assert disagree.estimate == pytest.approx(2.5 / 4.5)
    # Post-stratified: stratum 0 (pool 1 item) holds votes 1 and 2, stratum 1 (pool 3 items)
    # vote 3: a-bar (2 + 0) / 6 and d-bar 2 / 6; a-bar 0.5 = d-bar. (1/3 + 3 * 0.5) / (1/3 + 1.5).
    post = poststratified_agreement(
        [0.0, 0.0, 0.5], [2.0, 4.0, 5.0], ["p1", "p1", "p2"], [0, 0, 1],
        pool_clusters=["p1", "p2", "p2", "p2"], pool_strata=[0, 1, 1, 1],
        compared=compared, rounds=50,
    )  # fmt: skip
    assert post.estimate == pytest.approx(1.5 / (1 / 3 + 1.5))
    nothing = hajek_agreement([0.0], [0.5], ["p1"], compared=[0.0])
    assert math.isnan(nothing.estimate)


def test_weighted_agreement_without_ties_of_a_simulated_active_study_is_unbiased_and_covers() -> (
    None
):
    """600 pairs on 120 prompts as above; on each pair the judge names a side in a share d_i of
    its votes (1, or 1/2 where one order says tie), a person votes tie with probability
    tau_i and otherwise agrees with the judge's side with probability t_i. The truth is the
    pool's rate among comparisons: sum (1 - tau) d t / sum (1 - tau) d."""
    rng = np.random.default_rng(20261205)
    n, labels, share, repeats = 600, 400, 0.2, 200
    prompt = np.repeat(np.arange(120), 5)
    stratum = rng.choice(4, size=n, p=[0.6, 0.1, 0.1, 0.2])
    d_pair = np.where(stratum >= 2, 0.5, 1.0)
    tau = np.array([0.1, 0.2, 0.4, 0.3])[stratum]
    t = np.clip(np.array([0.9, 0.7, 0.75, 0.5])[stratum] + rng.normal(0, 0.05, n), 0, 1)
    priority = np.array([0.1, 0.6, 0.5, 1.0])[stratum]
    q = share / n + (1 - share) * priority / priority.sum()
    truth = float(((1 - tau) * d_pair * t).sum() / ((1 - tau) * d_pair).sum())
    results: dict[str, list[float]] = {"hajek": [], "post": []}
    covered = dict.fromkeys(results, 0)
    for seed in range(repeats):
        draw = np.random.default_rng(seed)
        picked = draw.choice(n, size=labels, p=q / q.sum())
        sided = draw.random(labels) >= tau[picked]
        agrees = draw.random(labels) < t[picked]
        compared = np.where(sided, d_pair[picked], 0.0)
        agree = np.where(agrees, compared, 0.0)
        for name, result in (
            ("hajek", hajek_agreement(
                agree, q[picked], prompt[picked], compared=compared, rounds=400, seed=seed
            )),
            ("post", poststratified_agreement(
                agree, 1 / q[picked], prompt[picked], stratum[picked], pool_clusters=prompt,
                pool_strata=stratum, compared=compared, rounds=400, seed=seed,
            )),
        ):  # fmt: skip
            results[name].append(result.estimate)
            covered[name] += result.lower <= truth <= result.upper
    for name, values in results.items():
        estimates = np.array(values)
        standard_error = estimates.std(ddof=1) / np.sqrt(repeats)
        assert abs(estimates.mean() - truth) < 3 * standard_error, name
        assert covered[name] / repeats >= 0.88, name
