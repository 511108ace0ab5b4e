"""Length bias, rationales, the gold order and win rates in the report, each checked against a
plain Python computation on the same small study."""

from __future__ import annotations

import csv
import io
import itertools
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from django.test import Client
from django.urls import reverse
from scipy import stats

from annotation.models import (
    Answer,
    HumanJudgment,
    Pair,
    Prompt,
    Study,
    System,
    Worker,
)
from core.conventions import SEVEN_VALUE_KEYS
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun
from leaderboard.report.gold_order import gold_orders, gold_pair_kinds
from leaderboard.services.reports import (
    ReportParams,
    agreement_report_build,
    agreement_report_snapshot,
)
from leaderboard.stats.bootstrap import cluster_proportion
from rankeval.ndcg import ndcg_at_k
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.leaderboard.conftest import get_computed, run_import

FAST = ReportParams(ci_rounds=10, elo_rounds=3, bt_rounds=3)
SYSTEMS = ("s1", "s2", "s3", "s4")
KEYS = sorted(SEVEN_VALUE_KEYS)


@dataclass
class Vote:
    source: str
    pair: Pair
    label: str
    likert: int
    values: list[str]


@dataclass
class World:
    study: Study
    pairs: list[Pair]
    votes: list[Vote]
    lengths: dict[int, int]  # answer id -> characters
    gold: dict[int, list[Answer]]  # prompt id -> answers best first
    scores: dict[int, float]  # answer id -> PL score


def _label(likert: int) -> str:
    return "A" if likert <= 3 else "B" if likert >= 6 else "tie"


@pytest.fixture
def world(cast: Cast) -> World:
    rng = random.Random(11)
    study = cast.study
    workers = [cast.worker_one, cast.worker_two]
    workers.append(Worker.objects.create(study=study, panel="invite", external_id="third"))
    systems = [System.objects.create(study=study, name=name) for name in SYSTEMS]
    runs = {}
    for name in ("judge x", "judge y"):
        judge = Judge.objects.create(name=name, kind=Judge.Kind.LLM)
        runs[name] = JudgeRun.objects.create(judge=judge, study=study, status="done")
    pl = JudgeRun.objects.create(
        judge=Judge.objects.create(name="pl scores", kind=Judge.Kind.PL), study=study, status="done"
    )
    pairs: list[Pair] = []
    votes: list[Vote] = []
    lengths: dict[int, int] = {}
    gold: dict[int, list[Answer]] = {}
    scores: dict[int, float] = {}
    for p in range(6):
        prompt = Prompt.objects.create(
            study=study, external_id=f"q{p}", category="cooking" if p % 2 else "money", turns=["?"]
        )
        ranks = rng.sample(range(1, 5), 4)
        answers = []
        for system, rank in zip(systems, ranks, strict=True):
            size = rng.randint(5, 60)
            by_upvotes = p == 5  # the last prompt has upvotes only
            answer = Answer.objects.create(
                prompt=prompt,
                system=system,
                turns=["x" * size],
                rank=None if by_upvotes else rank,
                upvotes=(10 - rank) * 3 if by_upvotes else None,
            )
            lengths[answer.pk] = size
            answers.append(answer)
            scores[answer.pk] = rng.random()
            AnswerScore.objects.create(run=pl, answer=answer, score=scores[answer.pk])
        gold[prompt.pk] = sorted(answers, key=lambda a: (a.rank or 0) - (a.upvotes or 0))
        for first, second in itertools.combinations(answers, 2):
            pair = Pair.objects.create(study=study, prompt=prompt, answer_a=first, answer_b=second)
            pairs.append(pair)
            for worker in workers:
                a_left = rng.random() < 0.5
                likert = rng.randint(1, 8)
                label = _label(likert)
                values = rng.sample(KEYS, rng.randint(1, 3)) if label != "tie" else []
                HumanJudgment.objects.create(
                    study=study,
                    pair=pair,
                    worker=worker,
                    assignment=make_assignment(pair, worker, a_left=a_left),
                    a_left=a_left,
                    likert_shown=likert if a_left else 9 - likert,
                    likert=likert,
                    preference=label,
                    values=values,
                )
                votes.append(Vote("human", pair, label, likert, values))
            for name, run in runs.items():
                likert = rng.randint(1, 8)
                label = _label(likert)
                JudgeCall.objects.create(
                    run=run,
                    pair=pair,
                    order="ab",
                    status="done",
                    likert_shown=likert,
                    likert=likert,
                    preference=label,
                )
                votes.append(Vote(name, pair, label, likert, []))
    return World(study, pairs, votes, lengths, gold, scores)


def wilson(k: int, n: int) -> tuple[float, float]:
    z = stats.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_length_bias_counts_votes_for_the_longer_answer_and_correlates_with_the_gap(
    world: World,
) -> None:
    report = agreement_report_build(study=world.study, params=FAST)
    section = report["length_bias"]
    assert section["has_answer_texts"] is True
    for source in ("human", "judge x", "judge y"):
        mine = [v for v in world.votes if v.source == source]
        diffs = [
            world.lengths[v.pair.answer_b_id] - world.lengths[v.pair.answer_a_id] for v in mine
        ]
        decisive = [(v, d) for v, d in zip(mine, diffs, strict=True) if v.label != "tie" and d]
        longer = sum(1 for v, d in decisive if (v.label == "B") == (d > 0))
        got = section["sources"][source]
        assert got["votes"] == len(mine)
        assert (got["prefers_longer"]["count"], got["prefers_longer"]["total"]) == (
            longer,
            len(decisive),
        )
        # The interval resamples the six prompts: the same bootstrap over the hand-made hits.
        expected_interval = cluster_proportion(
            [(v.label == "B") == (d > 0) for v, d in decisive],
            [v.pair.prompt_id for v, _ in decisive],
            unit="decisive vote",
            resampled="prompt",
            rounds=FAST.ci_rounds,
            seed=FAST.seed,
        )
        assert got["prefers_longer"]["unit"] == "decisive vote"
        assert (got["prefers_longer"]["resampled"], got["prefers_longer"]["clusters"]) == (
            "prompt",
            6,
        )
        assert got["prefers_longer"]["lower"] == pytest.approx(expected_interval.lower)
        assert got["prefers_longer"]["upper"] == pytest.approx(expected_interval.upper)
        signs = [{"A": -1, "tie": 0, "B": 1}[v.label] for v in mine]
        expected = stats.spearmanr(diffs, signs).statistic
        assert got["correlation_preference"]["estimate"] == pytest.approx(expected, abs=1e-9)
        expected_likert = stats.spearmanr(diffs, [v.likert for v in mine]).statistic
        assert got["correlation_likert"]["estimate"] == pytest.approx(expected_likert, abs=1e-9)
        assert got["correlation_likert"]["n"] == len(mine)


def test_without_answer_texts_length_bias_says_so_instead_of_giving_numbers(
    world: World,
) -> None:
    Answer.objects.filter(prompt__study=world.study).update(turns=[])
    section = agreement_report_build(study=world.study, params=FAST)["length_bias"]
    assert section["has_answer_texts"] is False
    assert section["status"] == "no answer texts"
    assert set(section["sources"]) == {"human", "judge x", "judge y", "pl scores"}
    assert all(value is None for value in section["sources"].values())


def distribution(selections: list[list[str]]) -> dict[str, int]:
    counts = Counter(value for selection in selections for value in set(selection))
    return {key: counts.get(key, 0) for key in KEYS}


def counts_of(entry: dict[str, object]) -> dict[str, int]:
    return {row["value"]: row["count"] for row in entry["values"]}  # type: ignore[attr-defined]


def test_rationale_counts_each_value_overall_by_category_and_where_judges_disagree(
    world: World,
) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["rationale"]
    people = [v for v in world.votes if v.source == "human" and v.values]
    assert section["overall"]["judgments"] == len(people)
    assert counts_of(section["overall"]) == distribution([v.values for v in people])
    share = {row["value"]: row["share"] for row in section["overall"]["values"]}
    assert share["empathy"] == pytest.approx(
        distribution([v.values for v in people])["empathy"] / len(people)
    )
    assert (section["overall"]["interval_unit"], section["overall"]["clusters"]) == ("prompt", 6)
    for row in section["overall"]["values"]:
        interval = cluster_proportion(
            [row["value"] in v.values for v in people],
            [v.pair.prompt_id for v in people],
            unit="judgment",
            resampled="prompt",
            rounds=FAST.ci_rounds,
            seed=FAST.seed,
        )
        assert (row["lower"], row["upper"]) == pytest.approx((interval.lower, interval.upper))
    for entry in section["by_category"]:
        mine = [v.values for v in people if v.pair.prompt.category == entry["category"]]
        assert counts_of(entry) == distribution(mine)
    assert {e["category"] for e in section["by_category"]} == {"cooking", "money"}

    majority = {}
    for pair in world.pairs:
        tally = Counter(v.label for v in world.votes if v.source == "human" and v.pair == pair)
        (top, n), *rest = tally.most_common()
        majority[pair.pk] = top if not rest or rest[0][1] < n else "tie"
    judged = {(v.source, v.pair.pk): v.label for v in world.votes if v.source != "human"}
    entries = {(e["with"], e["against"]): e for e in section["judge_disagreement"]}
    assert set(entries) == {(x, y) for x, y in itertools.permutations(["judge x", "judge y"])}
    for x, y in entries:
        chosen = [
            p.pk
            for p in world.pairs
            if judged[(x, p.pk)] != judged[(y, p.pk)]
            and majority[p.pk] == judged[(x, p.pk)]
            and majority[p.pk] != "tie"
        ]
        cited = [v.values for v in people if v.pair.pk in chosen and v.label == majority[v.pair.pk]]
        assert entries[(x, y)]["pairs"] == len(chosen)
        assert counts_of(entries[(x, y)]) == distribution(cited)
    assert sum(e["pairs"] for e in entries.values()) > 0


def brute_ndcg(scores: list[float], gains: list[float], k: int | None) -> float:
    """Mean of NDCG@k over every order of the equally scored items."""
    results = []
    for order in itertools.permutations(range(len(scores))):
        ranked = sorted(order, key=lambda i: -scores[i])  # stable: ties keep this order
        results.append(
            ndcg_at_k([len(scores) - r for r in range(len(scores))], [gains[i] for i in ranked], k)
        )
    return sum(results) / len(results)


@pytest.mark.parametrize(
    ("scores", "gains"),
    [
        ([0.5, 0.5, 0.1, 0.9], [4, 3, 2, 1]),
        ([1.0, 1.0, 1.0], [3, 2, 1]),
        ([0.2, 0.7, 0.7, 0.7, 0.1], [5, 1, 4, 2, 3]),
    ],
)
def test_tie_aware_ndcg_is_the_mean_over_orders_of_the_tied_items(
    scores: list[float], gains: list[float]
) -> None:
    for k in (1, 2, 3, None):
        assert ndcg_at_k(scores, gains, k) == pytest.approx(brute_ndcg(scores, gains, k))


def test_gold_order_accuracy_and_ndcg_match_a_plain_computation(world: World) -> None:
    first_vs_last = world.pairs[0]  # will be the gold one below if it is not already that pair
    order = world.gold[first_vs_last.prompt_id]
    best, worst = order[0], order[-1]
    gold_pair = next(
        p for p in world.pairs if {p.answer_a_id, p.answer_b_id} == {best.pk, worst.pk}
    )
    Pair.objects.filter(pk=gold_pair.pk).update(
        is_gold=True,
        gold_kind="first_vs_last",
        gold_side="A" if gold_pair.answer_a_id == best.pk else "B",
    )
    section = agreement_report_build(study=world.study, params=FAST)["gold_order"]
    assert section["prompts_with_order"] == 6
    for kind, position in (("first_vs_second", 1), ("first_vs_last", 3)):
        wanted: dict[int, str] = {}
        for answers in world.gold.values():
            top, other = answers[0], answers[position]
            for pair in world.pairs:
                if {pair.answer_a_id, pair.answer_b_id} == {top.pk, other.pk}:
                    wanted[pair.pk] = "A" if pair.answer_a_id == top.pk else "B"
        assert section["pairs"][kind] == len(wanted) == 6
        for source in ("human", "judge x", "judge y"):
            mine = [v for v in world.votes if v.source == source and v.pair.pk in wanted]
            right = sum(1 for v in mine if v.label == wanted[v.pair.pk])
            cell = section["accuracy"][source][kind]["votes"]
            ties = sum(1 for v in mine if v.label == "tie")
            assert (cell["count"], cell["total"], cell["ties"]) == (right, len(mine), ties)
            # Both tie rules, labelled: a tie wrong (strict), and half correct (AdvisorQA's).
            assert cell["share"] == pytest.approx(right / len(mine))
            assert cell["ties_half"]["share"] == pytest.approx((right + ties / 2) / len(mine))
            for got in (cell, cell["ties_half"]):
                assert (got["unit"], got["resampled"], got["clusters"]) == ("vote", "prompt", 6)
                assert got["method"] == "cluster bootstrap" and got["rounds"] == FAST.ci_rounds
                assert got["lower"] <= got["share"] <= got["upper"]
        majority_right = 0
        for pair_id, side in wanted.items():
            tally = Counter(
                v.label for v in world.votes if v.source == "human" and v.pair.pk == pair_id
            )
            (top_label, n), *rest = tally.most_common()
            label = top_label if not rest or rest[0][1] < n else "tie"
            majority_right += label == side
        majority = section["accuracy"]["human"][kind]["majority"]
        assert (majority["count"], majority["total"]) == (majority_right, 6)
        assert majority["unit"] == "pair majority"

    for source in ("human", "judge x", "judge y", "pl scores"):
        per_prompt = {1: [], 3: [], None: []}  # type: dict[int | None, list[float]]
        for answers in world.gold.values():
            n = len(answers)
            gains = [float(n - i) for i in range(n)]  # distinct ranks: position i + 1
            if source == "pl scores":
                scores = [world.scores[a.pk] for a in answers]
            else:
                wins: dict[int, list[float]] = {a.pk: [] for a in answers}
                for v in world.votes:
                    if v.source == source and v.pair.prompt_id == answers[0].prompt_id:
                        a_score = {"A": 1.0, "B": 0.0, "tie": 0.5}[v.label]
                        wins[v.pair.answer_a_id].append(a_score)
                        wins[v.pair.answer_b_id].append(1.0 - a_score)
                scores = [sum(wins[a.pk]) / len(wins[a.pk]) for a in answers]
            for k in per_prompt:
                per_prompt[k].append(brute_ndcg(scores, gains, k))
        got = section["ndcg"]["sources"][source]
        assert got["prompts"] == 6
        assert got["ranking"] == ("answer scores" if source == "pl scores" else "pairwise wins")
        for k, key in ((1, "at_1"), (3, "at_3"), (None, "at_all")):
            assert got[key] == pytest.approx(sum(per_prompt[k]) / 6, abs=1e-9)


def test_win_rate_matrix_of_each_source_counts_wins_with_ties_as_half(world: World) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["win_rates"]
    for source in ("human", "judge x", "judge y"):
        wins: dict[tuple[str, str], float] = defaultdict(float)
        games: Counter[tuple[str, str]] = Counter()
        for v in world.votes:
            if v.source != source:
                continue
            a = v.pair.answer_a.system.name
            b = v.pair.answer_b.system.name
            score = {"A": 1.0, "B": 0.0, "tie": 0.5}[v.label]
            wins[(a, b)] += score
            wins[(b, a)] += 1.0 - score
            games[(a, b)] += 1
            games[(b, a)] += 1
        got = section["sources"][source]
        assert got["models"] == list(SYSTEMS)
        assert got["battles"] == sum(games.values()) // 2
        for i, row in enumerate(SYSTEMS):
            for j, column in enumerate(SYSTEMS):
                cell = got["rates"][i][j]
                if row == column:
                    assert cell is None
                else:
                    assert cell == pytest.approx(wins[(row, column)] / games[(row, column)])
    assert section["sources"]["pl scores"]["battles"] == 0


def page_url(study: Study, view: str = "study_analysis", **kwargs: str) -> str:
    return reverse(f"leaderboard:{view}", kwargs={"slug": study.slug, **kwargs})


def test_dashboard_shows_the_new_tables_and_the_heatmap_with_values_in_its_cells(
    client: Client, cast: Cast, world: World
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(client, page_url(world.study)).content.decode()
    for table in ("length-bias", "rationale", "gold-order-accuracy", "ndcg", "win-rates"):
        assert f'id="table-{table}"' in page
    for plot in ("length-bias", "rationale", "rationale-by-category", "win-rate-judge-x"):
        assert f'id="plot-{plot}"' in page
    report = agreement_report_build(study=world.study, params=ReportParams())
    rates = report["win_rates"]["sources"]["judge x"]
    svg = get_computed(
        client, page_url(world.study, "study_analysis_plot", name="win-rate-judge-x")
    )
    assert svg.status_code == 200 and svg["Content-Type"].startswith("image/svg+xml")
    text = svg.content.decode()
    for i, row in enumerate(rates["rates"]):
        for j, value in enumerate(row):
            if i != j:
                assert f">{value:.2f}</text>" in text


def test_length_bias_table_downloads_as_csv_with_the_counts(
    client: Client, cast: Cast, world: World
) -> None:
    client.force_login(cast.admin)
    response = get_computed(
        client, page_url(world.study, "study_analysis_table", name="length-bias")
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    report = agreement_report_build(study=world.study, params=ReportParams())
    by_source = {row["source"]: row for row in rows}
    longer = report["length_bias"]["sources"]["judge y"]["prefers_longer"]
    assert int(by_source["judge y"]["decisive votes with a length gap"]) == longer["total"]
    assert float(by_source["judge y"]["prefers longer: share"]) == pytest.approx(longer["share"])


def test_an_imported_study_without_answer_texts_says_so_on_the_dashboard(
    client: Client, cast: Cast, files: dict[str, Path]
) -> None:
    run_import(files)
    client.force_login(cast.admin)
    page = get_computed(client, page_url(Study.objects.get(slug="mt-bench"))).content.decode()
    assert "no answer texts" in page
    assert 'id="plot-length-bias"' not in page
    assert 'id="plot-win-rate-human"' in page


def test_a_tie_at_the_top_of_the_gold_order_gives_no_first_vs_second_pair() -> None:
    answers = pd.DataFrame(
        {
            "answer_id": [1, 2, 3, 4, 5],
            "prompt_id": [10, 10, 10, 20, 20],
            "rank": [1.0, 1.0, 2.0, None, None],
            "upvotes": [None, None, None, 3.0, 9.0],
        }
    )
    orders = gold_orders(answers)
    assert orders[10]["position"].tolist() == [1, 1, 3]
    assert orders[20]["answer_id"].tolist() == [5, 4]  # more upvotes first
    pairs = pd.DataFrame(
        {
            "pair_id": [100, 101, 102, 103],
            "prompt_id": [10, 10, 10, 20],
            "is_gold": [False, False, False, False],
            "gold_side": ["", "", "", ""],
            "gold_kind": ["", "", "", ""],
        }
    )
    ends = pd.DataFrame(
        {"pair_id": [100, 101, 102, 103], "answer_a_id": [1, 1, 2, 4], "answer_b_id": [2, 3, 3, 5]}
    )
    kinds = gold_pair_kinds(pairs=pairs, lengths=ends, orders=orders)
    assert kinds.to_dict("records") == [
        {"pair_id": 101, "kind": "first_vs_last", "side": "A"},
        {"pair_id": 103, "kind": "first_vs_last", "side": "B"},
        {"pair_id": 103, "kind": "first_vs_second", "side": "B"},
    ]


def test_answer_texts_edited_in_place_give_new_length_numbers_when_a_recompute_is_asked(
    world: World,
) -> None:
    first = agreement_report_snapshot(study=world.study, params=FAST)
    assert first.payload is not None and first.payload["length_bias"]["has_answer_texts"] is True
    assert (
        agreement_report_snapshot(study=world.study, params=FAST).computed_at == first.computed_at
    )
    Answer.objects.filter(prompt__study=world.study).update(turns=[])
    second = agreement_report_snapshot(study=world.study, params=FAST, recompute=True)
    assert second.pk == first.pk  # one snapshot per key, recomputed
    assert second.payload is not None
    assert second.payload["length_bias"]["status"] == "no answer texts"


def test_small_samples_get_a_method_fit_for_their_size(world: World) -> None:
    report = agreement_report_build(study=world.study, params=FAST)
    # Four systems: no interval for a rank correlation, an exact permutation p-value instead.
    pairs = [p for p in report["leaderboards"]["rank_correlation"] if len(p["models"]) == 4]
    assert pairs
    for pair in pairs:
        for name in ("spearman", "kendall"):
            corr = pair[name]
            assert corr["estimate"] is not None
            assert corr["interval"] == "too few systems for an interval"
            assert corr["lower"] is None and corr["upper"] is None
            assert corr["p_method"] == "exact permutation"
    # Per-category correlations of tied unit scores: a bootstrap over the category's prompts.
    for entry in report["per_category"]["categories"]:
        for name in ("pearson", "spearman"):
            corr = entry["judges"]["judge x"][name]
            assert corr["interval"] == "prompt bootstrap"
            assert corr["lower"] <= corr["estimate"] <= corr["upper"]
    # Every pair has three votes: the generalised Fleiss' kappa is Fleiss' kappa on them all.
    people = report["human_vs_human"]
    general, fleiss = people["fleiss_kappa_generalized"], people["fleiss_kappa"]
    assert general["units"] == fleiss["units"] == len(world.pairs)
    assert general["kappa"] == pytest.approx(fleiss["kappa"], abs=1e-9)
