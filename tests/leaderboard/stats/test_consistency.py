import itertools
import math

import numpy as np
import pandas as pd
import pytest

from leaderboard.stats.bootstrap import cluster_proportion
from leaderboard.stats.consistency import (
    PairRepeated,
    choice_consistency,
    contrast_pairs_select,
    fusion_retrieval,
    intransitive_triples,
    intransitive_triples_coded,
    reward_fusion,
    score_agreement,
    score_consistency,
    swap_invariance,
)

# Six hand-made question embeddings on orthonormal axes u1..u6, with their cosines:
#   cos(0, 1) = 0.80   in [0.75, 0.9]
#   cos(2, 3) = 0.85   in the window
#   cos(3, 4) = 0.85 * 0.95 = 0.8075   in the window
#   cos(2, 4) = 0.95   above it (a near duplicate)
#   item 5 is orthogonal to all; every other cosine is 0.
_EYE = np.eye(6)
EMBEDDINGS = np.stack(
    [
        _EYE[0],
        0.8 * _EYE[0] + 0.6 * _EYE[1],
        _EYE[2],
        0.85 * _EYE[2] + math.sqrt(1 - 0.85**2) * _EYE[3],
        0.95 * _EYE[2] + math.sqrt(1 - 0.95**2) * _EYE[4],
        _EYE[5],
    ]
)


def test_the_hand_made_embeddings_have_the_cosines_the_test_relies_on() -> None:
    cos = EMBEDDINGS @ EMBEDDINGS.T
    assert cos[0, 1] == pytest.approx(0.8)
    assert cos[2, 3] == pytest.approx(0.85)
    assert cos[3, 4] == pytest.approx(0.8075)
    assert cos[2, 4] == pytest.approx(0.95)


def test_the_window_picks_the_expected_prompt_pairs_each_prompt_at_most_once() -> None:
    seen: set[tuple[tuple[int, int], ...]] = set()
    for seed in range(30):
        selection = contrast_pairs_select(EMBEDDINGS, low=0.75, high=0.9, seed=seed)
        used = [item for pair in selection.pairs for item in pair]
        assert len(used) == len(set(used)), "a prompt is in two contrast pairs"
        assert (0, 1) in selection.pairs
        assert set(selection.pairs) <= {(0, 1), (2, 3), (3, 4)}
        assert len(selection.pairs) == 2
        seen.add(selection.pairs)
    # Item 3 can pair with 2 or with 4 (never both); the seed's visiting order decides.
    assert seen == {((0, 1), (2, 3)), ((0, 1), (3, 4))}


def test_the_same_seed_gives_the_same_pairs() -> None:
    first = contrast_pairs_select(EMBEDDINGS, seed=7)
    assert contrast_pairs_select(EMBEDDINGS, seed=7) == first


def test_the_selection_counts_candidates_near_duplicates_and_unrelated_pairs() -> None:
    selection = contrast_pairs_select(EMBEDDINGS, low=0.75, high=0.9)
    assert (selection.candidates, selection.above, selection.below) == (3, 1, 11)
    assert selection.max_similarity == pytest.approx(0.95)


def test_the_window_ends_are_configurable_and_included() -> None:
    narrow = contrast_pairs_select(EMBEDDINGS, low=0.81, high=0.9)
    assert narrow.pairs == ((2, 3),)
    assert narrow.similarities == (pytest.approx(0.85),)
    # 0.8 is the window's lower end and is included.
    assert (0, 1) in contrast_pairs_select(EMBEDDINGS, low=0.8, high=0.9).pairs
    wide = contrast_pairs_select(EMBEDDINGS, low=0.9, high=1.0, seed=3)
    assert wide.pairs == ((2, 4),)


def test_too_few_similar_prompts_say_how_many_pairs_were_found_and_why() -> None:
    selection = contrast_pairs_select(EMBEDDINGS[[0, 2, 4, 5]], low=0.75, high=0.9)
    assert selection.pairs == ()
    message = selection.explain()
    assert "Found 0 contrast pair(s) among 4 prompts" in message
    assert "of 6 prompt pairs, none has a question cosine in [0.75, 0.9]" in message
    assert "1 are above 0.9 (near duplicates) and 5 below 0.75" in message
    assert "cosine 0.950" in message
    assert "needs two" in contrast_pairs_select(EMBEDDINGS[:1]).explain()


def test_a_bad_window_or_a_zero_embedding_is_refused() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        contrast_pairs_select(EMBEDDINGS, low=0.9, high=0.8)
    with pytest.raises(ValueError, match=r"rows \[1\] are zero vectors"):
        contrast_pairs_select(np.array([[1.0, 0.0], [0.0, 0.0]]))


# Scores h(I_i, r_j) of three contrast pairs: [[h(IA, rA), h(IA, rB)], [h(IB, rA), h(IB, rB)]].
#   pair 0: Eq. 2 3>1 yes, Eq. 3 3>2 yes;  other direction: C_res 4>2 yes, C_ins 4>1 yes
#   pair 1: Eq. 2 1>2 no,  Eq. 3 1>0 yes;  other direction: C_res 1>0 yes, C_ins 1>2 no
#   pair 2: Eq. 2 5=5 tie, Eq. 3 5>4 yes;  other direction: C_res 2>4 no,  C_ins 2>5 no
SCORES = [[[3, 1], [2, 4]], [[1, 2], [0, 1]], [[5, 5], [4, 2]]]


def test_c_res_and_c_ins_count_one_comparison_per_contrast_pair_as_eq_2_and_3() -> None:
    result = score_consistency(SCORES)
    assert result.pairs == 3
    assert (result.c_res.proportion.count, result.c_res.proportion.total) == (1, 3)
    assert (result.c_ins.proportion.count, result.c_ins.proportion.total) == (3, 3)
    assert result.c_res.ties == 1
    assert result.c_ins.ties == 0
    assert result.c_res.baseline == result.c_ins.baseline == 0.5
    assert result.c_res.proportion.unit == "contrast pair"


def test_the_two_direction_count_is_kept_only_as_a_named_extra() -> None:
    result = score_consistency(SCORES)
    assert result.c_res_both_directions is not None and result.c_ins_both_directions is not None
    both_res, both_ins = result.c_res_both_directions, result.c_ins_both_directions
    assert (both_res.proportion.count, both_res.proportion.total) == (3, 6)
    assert (both_ins.proportion.count, both_ins.proportion.total) == (4, 6)
    assert both_res.ties == 1
    # Its two comparisons of a pair share the pair's scores: the interval resamples pairs.
    assert both_res.proportion.method == "cluster bootstrap"
    assert (both_res.proportion.resampled, both_res.proportion.clusters) == ("contrast pair", 3)


def test_the_issue_example_reads_three_of_three_where_both_directions_read_four_of_six() -> None:
    # Given I_A its own answer always wins; the other direction only once.
    scores = [[[2, 1], [0, 3]], [[2, 1], [0, -1]], [[2, 1], [0, -1]]]
    result = score_consistency(scores)
    assert (result.c_res.proportion.count, result.c_res.proportion.total) == (3, 3)
    assert result.c_res_both_directions is not None
    both = result.c_res_both_directions.proportion
    assert (both.count, both.total) == (4, 6)


def test_c_res_of_independent_contrast_pairs_carries_the_wilson_interval_of_its_counts() -> None:
    # 1 of 3 by hand: p = 1/3, z = 1.96: centre (p + z²/6) / (1 + z²/3) = 0.4615 ... 0.0615
    # to 0.7923 (Wilson 1927).
    c_res = score_consistency(SCORES).c_res.proportion
    assert c_res.method == "wilson"
    assert c_res.share == pytest.approx(1 / 3)
    assert c_res.lower == pytest.approx(0.0615, abs=1e-4)
    assert c_res.upper == pytest.approx(0.7923, abs=1e-4)


def test_scores_of_the_wrong_shape_or_not_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match=r"shape \[n, 2, 2\]"):
        score_consistency([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match=r"pairs \[1\] are not finite"):
        score_consistency(np.array([[[1, 0], [0, 1]], [[np.nan, 0], [0, 1]]]))


def test_choice_consistency_counts_ties_as_misses() -> None:
    rate = choice_consistency(["A", "B", "tie", "A"], ["A", "A", "B", "A"])
    assert (rate.proportion.count, rate.proportion.total, rate.ties) == (2, 4, 1)
    with pytest.raises(ValueError, match="unknown verdict labels"):
        choice_consistency(["left"], ["A"])


def test_choice_consistency_resamples_the_contrast_pairs_it_is_given() -> None:
    # Two pairs: every verdict on pair 1 right, every one on pair 2 wrong. A round draws
    # {1, 1}, {1, 2} or {2, 2}: shares 1, 1/2 or 0, so the 95% interval spans [0, 1], where a
    # Wilson interval over 8 votes as if independent would be [0.22, 0.78].
    rate = choice_consistency(
        ["A"] * 4 + ["B"] * 4,
        ["A"] * 8,
        [1, 1, 1, 1, 2, 2, 2, 2],
        unit="vote",
        resampled="contrast pair",
        rounds=400,
        seed=1,
    )
    p = rate.proportion
    assert (p.count, p.total, p.clusters, p.rounds) == (4, 8, 2, 400)
    assert (p.lower, p.upper) == (0.0, 1.0)


def test_a_score_judges_agreement_with_people_on_a_worked_example() -> None:
    # Verdicts by P(B better) = sigmoid(h_B - h_A), Likert min(8, floor(8 P) + 1), with ties:
    #   pair 10, answers 1 v 2: sigmoid(-2) = 0.119, 8 P = 0.95 -> Likert 1 -> A
    #   pair 11, answers 2 v 3: the same -> A
    #   pair 12, answers 3 v 1: sigmoid(4) = 0.982, 8 P = 7.86 -> Likert 8 -> B
    #   pair 13, answers 5 v 6: sigmoid(-0.1) = 0.475, 8 P = 3.80 -> Likert 4 -> tie
    #   pair 14, answers 6 v 7: sigmoid(0) = 0.5, 8 P = 4 -> Likert 5 -> tie
    #   pair 15, answers 1 v 4: answer 4 has no score, so the pair and its votes are left out.
    scores = {1: 2.0, 2: 0.0, 3: -2.0, 5: 0.1, 6: 0.0, 7: 0.0}
    pairs = pd.DataFrame(
        [(10, 1, 2), (11, 2, 3), (12, 3, 1), (13, 5, 6), (14, 6, 7), (15, 1, 4)],
        columns=["pair_id", "answer_a", "answer_b"],
    )
    votes = pd.DataFrame(
        [(10, "A"), (10, "tie"), (11, "A"), (12, "A"), (13, "tie"), (14, "B"), (15, "A")],
        columns=["pair_id", "label"],
    )
    agreement = score_agreement(scores, pairs, votes)
    # Agree: 10 A, 11 A, 13 tie; disagree: 10 tie, 12 A, 14 B.
    assert (agreement.count, agreement.total) == (3, 6)
    assert agreement.share == 0.5
    assert agreement.lower == pytest.approx(0.1876, abs=1e-4)  # Wilson 95%, 3 of 6
    assert score_agreement({}, pairs, votes).total == 0


def test_reward_fusion_equals_eq_4_on_a_hand_example() -> None:
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    own = np.array([1.0, 2.0])
    train = np.array([[0.96, 0.28], [2.0, 0.0], [0.6, 0.8]])  # cos to query 0: 0.96, 1.0, 0.6
    train_scores = np.array([3.0, -1.0, 100.0])
    fused = reward_fusion(queries, own, train, train_scores, delta=0.95)
    # Query 0: (1 + 0.96*3 + 1.0*(-1)) / (1 + 0.96 + 1.0) = 2.88 / 2.96; the 0.6 one is left out.
    assert fused.scores[0] == pytest.approx(2.88 / 2.96)
    # Query 1: cosines 0.28, 0, 0.8, none above 0.95: its own score.
    assert fused.scores[1] == 2.0
    assert fused.neighbours.tolist() == [2, 0]


def test_reward_fusion_without_training_examples_keeps_the_own_scores() -> None:
    fused = reward_fusion(np.eye(2), [0.5, -0.5], np.empty((0, 2)), np.empty(0))
    assert fused.scores.tolist() == [0.5, -0.5]


def test_reward_fusion_over_the_training_set_itself_leaves_each_example_out_of_its_own() -> None:
    examples = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]])
    scores = np.array([1.0, 3.0, 5.0])
    fused = reward_fusion(examples, scores, examples, scores, leave_out_same_index=True)
    # 0 and 1 are neighbours (cosine 0.96), 2 has none.
    assert fused.scores.tolist() == pytest.approx(
        [(1 + 0.96 * 3) / 1.96, (3 + 0.96 * 1) / 1.96, 5.0]
    )
    assert fused.neighbours.tolist() == [1, 1, 0]


def test_swap_invariance_is_the_share_of_unchanged_verdicts() -> None:
    result = swap_invariance(["A", "B", "tie", "A"], ["A", "A", "tie", "B"])
    assert result.order_invariant is False
    assert result.proportion is not None
    assert (result.proportion.count, result.proportion.total) == (2, 4)


def test_an_order_invariant_judge_is_reported_as_such_not_as_one_hundred_percent() -> None:
    result = swap_invariance(["A"], ["A"], order_invariant=True)
    assert result.order_invariant is True
    assert result.proportion is None


def _frame(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["group", "first", "second", "label"])


def test_the_intransitive_triples_of_a_hand_made_tournament() -> None:
    verdicts = _frame(
        [
            # p1: a > b > c > a is a cycle; d loses to all (three transitive triples with d).
            ("p1", "a", "b", "A"),
            ("p1", "b", "c", "A"),
            ("p1", "a", "c", "B"),
            ("p1", "a", "d", "A"),
            ("p1", "d", "b", "B"),
            ("p1", "c", "d", "A"),
            # p2: one triple with a tie, set apart.
            ("p2", "x", "y", "A"),
            ("p2", "y", "z", "tie"),
            ("p2", "x", "z", "A"),
            # p3: only two of the three pairs judged, so no triple.
            ("p3", "u", "v", "A"),
            ("p3", "v", "w", "A"),
        ]
    )
    result = intransitive_triples(verdicts)
    assert (result.triples, result.intransitive, result.tied_triples) == (4, 1, 1)
    assert result.proportion.share == 0.25
    assert result.random_rate == 0.25


def test_the_cycle_count_matches_kendalls_circular_triad_formula() -> None:
    # Independent count: in a tournament on n items with win counts s_i, the circular triads
    # number C(n, 3) - sum_i C(s_i, 2) (Kendall and Babington Smith 1940).
    rng = np.random.default_rng(11)
    items = list("abcdefg")
    rows, expected = [], 0
    for g in range(20):
        wins = dict.fromkeys(items, 0)
        for x, y in itertools.combinations(items, 2):
            winner = x if rng.random() < 0.5 else y
            wins[winner] += 1
            rows.append((f"g{g}", x, y, "A" if winner == x else "B"))
        expected += math.comb(len(items), 3) - sum(math.comb(s, 2) for s in wins.values())
    result = intransitive_triples(_frame(rows))
    assert result.triples == 20 * math.comb(7, 3)
    assert result.intransitive == expected


def test_a_random_judge_makes_about_one_triple_in_four_intransitive() -> None:
    rng = np.random.default_rng(5)
    rows = [
        (f"g{g}", x, y, "A" if rng.random() < 0.5 else "B")
        for g in range(4000)
        for x, y in itertools.combinations("abc", 2)
    ]
    share = intransitive_triples(_frame(rows)).proportion.share
    assert share is not None
    assert share == pytest.approx(0.25, abs=0.02)


def test_two_verdicts_on_one_pair_of_a_group_are_refused() -> None:
    with pytest.raises(ValueError, match=r"group 'p': the pair \('b', 'a'\) has more than one"):
        intransitive_triples(_frame([("p", "a", "b", "A"), ("p", "b", "a", "A")]))


def reference_triples(rows: list[tuple[str, str, str, str]]) -> tuple[int, int, int]:
    """(decided, cyclic, tied) triples counted the plain way: every three items of a group."""
    edges: dict[str, dict[frozenset[str], str | None]] = {}
    for g, x, y, label in rows:
        edges.setdefault(g, {})[frozenset((x, y))] = (
            x if label == "A" else y if label == "B" else None
        )
    decided = cyclic = tied = 0
    for found in edges.values():
        items = sorted({item for key in found for item in key})
        for trio in itertools.combinations(items, 3):
            keys = [frozenset(p) for p in itertools.combinations(trio, 2)]
            if not all(k in found for k in keys):
                continue
            winners = [found[k] for k in keys]
            if None in winners:
                tied += 1
            else:
                decided += 1
                cyclic += len(set(winners)) == 3
    return decided, cyclic, tied


def test_the_triple_count_equals_the_plain_count_with_ties_gaps_and_groups_of_every_size() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for g in range(300):
        items = [f"i{k}" for k in rng.permutation(int(rng.integers(1, 9)))]
        for x, y in itertools.combinations(items, 2):
            if rng.random() < 0.15:
                continue  # a pair nobody judged
            label = str(rng.choice(["A", "B", "tie"], p=[0.45, 0.45, 0.1]))
            rows.append((f"g{g}", x, y, label))
    result = intransitive_triples(_frame(rows))
    assert (result.triples, result.intransitive, result.tied_triples) == reference_triples(rows)
    assert result.triples > 1000


def test_the_coded_count_does_not_depend_on_how_groups_and_items_are_numbered() -> None:
    # The report passes (prompt, turn) codes and answer ids: sparse, large, in any order.
    rng = np.random.default_rng(8)
    rows = []
    for g in range(200):
        items = [f"i{k}" for k in rng.permutation(int(rng.integers(2, 7)))]
        for x, y in itertools.combinations(items, 2):
            if rng.random() < 0.2:
                continue
            rows.append((f"g{g}", x, y, str(rng.choice(["A", "B", "tie"], p=[0.45, 0.45, 0.1]))))
    frame = _frame(rows)
    names = sorted(set(frame["group"]))
    sparse = rng.choice(10**6, size=len(names), replace=False).tolist()
    group_ids = dict(zip(names, sparse, strict=True))
    item_ids = {f"i{k}": int(v) for k, v in enumerate(rng.choice(10**9, size=7, replace=False))}
    coded = intransitive_triples_coded(
        frame["group"].map(group_ids).to_numpy(),
        frame["first"].map(item_ids).to_numpy(),
        frame["second"].map(item_ids).to_numpy(),
        pd.Categorical(frame["label"]),
    )
    plain = intransitive_triples(frame)
    assert (coded.triples, coded.intransitive, coded.proportion.share) == (
        plain.triples,
        plain.intransitive,
        plain.proportion.share,
    )
    assert (coded.triples, coded.intransitive, coded.tied_triples) == reference_triples(rows)
    with pytest.raises(PairRepeated) as repeated:
        intransitive_triples_coded([5, 5, 5], [10, 20, 10], [20, 30, 20], ["A", "B", "tie"])
    assert (repeated.value.kind, repeated.value.row) == ("twice", 2)


def test_swap_invariance_reads_categorical_verdicts_as_their_labels() -> None:
    forward, backward = ["A", "B", "tie", "A"], ["A", "A", "tie", "B"]
    plain = swap_invariance(forward, backward)
    assert swap_invariance(pd.Categorical(forward), pd.Categorical(backward)) == plain
    assert plain.proportion is not None and plain.proportion.count == 2
    with pytest.raises(ValueError, match=r"unknown verdict labels: \['None'\]"):
        swap_invariance(pd.Categorical(["A", None]), ["A", "B"])


def test_reward_fusion_never_retrieves_an_example_of_the_querys_own_group() -> None:
    # Query 0 (prompt 7) has a near copy from its own prompt (cosine 1.0) and one from prompt 8
    # (cosine 0.96): only the second is fused, and the first is counted as left out.
    queries = np.array([[1.0, 0.0]])
    train = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]])
    fused = reward_fusion(
        queries,
        [1.0],
        train,
        [5.0, 3.0, 100.0],
        delta=0.95,
        query_groups=[7],
        train_groups=[7, 8, 9],
    )
    assert fused.scores[0] == pytest.approx((1 + 0.96 * 3) / 1.96)
    assert fused.neighbours.tolist() == [1]
    assert fused.same_group_above.tolist() == [1]
    assert fused.nearest[0] == pytest.approx(0.96)
    summary = fusion_retrieval(fused, pool=3)
    assert (summary.queries, summary.pool, summary.queries_with_neighbours) == (1, 3, 1)
    assert summary.neighbours == 1 and summary.same_prompt_left_out == 1
    assert summary.neighbour_cosine_mean == pytest.approx(0.96)
    assert summary.neighbour_cosine_max == pytest.approx(0.96)


def test_the_triples_interval_resamples_groups_not_triples() -> None:
    # 10 prompts of 3 answers (one triple each): 5 cyclic, 5 transitive; the bootstrap draws the
    # 10 prompts.
    rows = []
    for g in range(10):
        cyclic = g < 5
        rows += [
            (f"p{g}", "a", "b", "A"),
            (f"p{g}", "b", "c", "A"),
            (f"p{g}", "a", "c", "B" if cyclic else "A"),
        ]
    result = intransitive_triples(_frame(rows), rounds=500, seed=2)
    p = result.proportion
    assert (p.count, p.total, p.share) == (5, 10, 0.5)
    assert (p.unit, p.clusters, p.method) == ("triple", 10, "cluster bootstrap")
    assert p.lower is not None and p.upper is not None
    assert p.lower < 0.5 < p.upper


def test_swap_invariance_and_score_agreement_resample_the_prompts_they_are_given() -> None:
    # Two prompts: one whose pairs all keep their verdict, one whose pairs all change.
    forward, backward = ["A"] * 4 + ["A"] * 4, ["A"] * 4 + ["B"] * 4
    prompts = [1] * 4 + [2] * 4
    result = swap_invariance(forward, backward, prompts, rounds=400, seed=3)
    assert result.proportion is not None
    assert (result.proportion.count, result.proportion.total) == (4, 8)
    assert (result.proportion.unit, result.proportion.resampled) == (
        "pair in both orders",
        "prompt",
    )
    expected = cluster_proportion(
        [True] * 4 + [False] * 4,
        prompts,
        unit="pair in both orders",
        resampled="prompt",
        rounds=400,
        seed=3,
    )
    assert (result.proportion.lower, result.proportion.upper) == (expected.lower, expected.upper)
    # Over two prompts the interval spans what drawing one prompt twice gives: 0 to 1.
    assert (expected.lower, expected.upper) == (0.0, 1.0)
    scores = {1: 2.0, 2: 0.0}
    pairs = pd.DataFrame([(10, 1, 2), (11, 2, 1)], columns=["pair_id", "answer_a", "answer_b"])
    votes = pd.DataFrame([(10, "A"), (10, "A"), (11, "A")], columns=["pair_id", "label"])
    agreement = score_agreement(
        scores, pairs, votes, prompts=pd.Series({10: 7, 11: 8}), rounds=200, seed=0
    )
    assert (agreement.count, agreement.total, agreement.clusters) == (2, 3, 2)
    assert (agreement.unit, agreement.resampled) == ("vote", "prompt")


def test_a_score_judges_agreement_reads_its_verdicts_at_the_fitted_temperature() -> None:
    """The PL judge maps P = sigmoid((h_B - h_A) / T): at T = 0.05 the 0.1 gap of pair 13 is a
    clear A (P = sigmoid(-2) = 0.12, Likert 1), not the tie it is at T = 1 (P = 0.475, Likert 4),
    so the person who called it a tie no longer agrees."""
    scores = {1: 2.0, 2: 0.0, 3: -2.0, 5: 0.1, 6: 0.0, 7: 0.0}
    pairs = pd.DataFrame(
        [(10, 1, 2), (11, 2, 3), (12, 3, 1), (13, 5, 6), (14, 6, 7)],
        columns=["pair_id", "answer_a", "answer_b"],
    )
    votes = pd.DataFrame(
        [(10, "A"), (10, "tie"), (11, "A"), (12, "A"), (13, "tie"), (14, "B")],
        columns=["pair_id", "label"],
    )
    plain = score_agreement(scores, pairs, votes)
    sharp = score_agreement(scores, pairs, votes, temperature=0.05)
    assert (plain.count, plain.total) == (3, 6)  # 10 A, 11 A, 13 tie agree
    assert (sharp.count, sharp.total) == (2, 6)  # 13 is now A: only 10 A and 11 A agree
    with pytest.raises(ValueError, match="temperature must be positive"):
        score_agreement(scores, pairs, votes, temperature=0.0)
