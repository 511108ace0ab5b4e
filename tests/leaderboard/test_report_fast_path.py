"""The fast report equals the straightforward one on a random small study.

The straightforward implementations are the benchmark's baseline (benchmarks/report_baseline.py);
only the agreement intervals may differ, their bootstrap drawing unit types instead of unit
indices (same distribution, different draws).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pytest

from annotation.models import Study
from benchmarks import report_baseline
from benchmarks.report_baseline import baseline
from leaderboard.report import agreement, position_bias
from leaderboard.services.reports import ReportParams, agreement_report_build
from leaderboard.stats.agreement import krippendorff_alpha_from_long
from leaderboard.stats.bootstrap import ClusterProportion, cluster_proportion
from leaderboard.stats.majority import people_majority
from leaderboard.stats.mtbench import calls_sort
from tests.leaderboard.conftest import run_import, write_jsonl

MODELS = ["alpaca-13b", "claude-v1", "gpt-3.5-turbo", "gpt-4", "llama-13b"]


def random_study_files(tmp_path: Path, seed: int) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    questions = [
        {"question_id": q, "category": ["writing", "math", "coding"][q % 3], "turns": ["a", "b"]}
        for q in range(1, 9)
    ]
    human, gpt4 = [], []
    for q in range(1, 9):
        for turn in (1, 2):
            combos = [(a, b) for a in range(len(MODELS)) for b in range(a + 1, len(MODELS))]
            for index in rng.choice(len(combos), 3, replace=False):
                a, b = combos[index] if rng.random() < 0.5 else combos[index][::-1]
                pair = {"question_id": q, "turn": turn, "model_a": MODELS[a], "model_b": MODELS[b]}
                for rater in rng.choice(6, int(rng.integers(1, 5)), replace=False):
                    human.append(
                        pair
                        | {
                            "winner": str(rng.choice(["model_a", "model_b", "tie"])),
                            "judge": f"expert_{rater}",
                        }
                    )
                verdict = rng.choice(["model_a", "model_b", "tie", "tie (inconsistent)"])
                gpt4.append(pair | {"winner": str(verdict), "judge": "gpt4_pair"})
    return {
        "questions": write_jsonl(tmp_path / "q.jsonl", questions),
        "human": write_jsonl(tmp_path / "human.jsonl", human),
        "gpt4": write_jsonl(tmp_path / "gpt4.jsonl", gpt4),
    }


def without_intervals(report: Any) -> Any:
    if isinstance(report, dict):
        return {k: without_intervals(v) for k, v in report.items() if k != "ci"}
    if isinstance(report, list):
        return [without_intervals(v) for v in report]
    return report


@pytest.mark.parametrize("seed", [0, 1])
def test_the_fast_report_equals_the_straightforward_one_on_a_random_study(
    db: None, tmp_path: Path, seed: int
) -> None:
    run_import(random_study_files(tmp_path, seed))
    study = Study.objects.get(slug="mt-bench")
    params = ReportParams(seed=seed, ci_rounds=200, elo_rounds=30, bt_rounds=10)

    fast = agreement_report_build(study=study, params=params)
    with baseline():
        slow = agreement_report_build(study=study, params=params)

    assert fast["counts"]["human_votes"] > 50
    assert without_intervals(fast) == without_intervals(slow)
    ci, slow_ci = fast["human_vs_human"]["ci"], slow["human_vs_human"]["ci"]
    assert ci["units"] == slow_ci["units"]
    for name in ("with_ties", "without_ties"):
        assert ci[name]["lower"] <= fast["human_vs_human"][name]["rate"] <= ci[name]["upper"]


def random_calls(seed: int, pairs: int = 300) -> pd.DataFrame:
    """One run's calls in any order: one or two calls per pair and order, some in both orders
    at once, some without a shown score."""
    rng = np.random.default_rng(seed)
    rows = []
    for pair in range(1, pairs + 1):
        for order in ("ab", "ba", "both"):
            for _ in range(int(rng.choice([0, 1, 1, 2]))):
                shown = float(rng.integers(1, 9)) if rng.random() < 0.8 else np.nan
                label = str(rng.choice(["A", "B", "tie"]))
                rows.append((pair, 1, order, label, shown))
    frame = pd.DataFrame(rows, columns=["pair_id", "run_id", "order", "label", "likert_shown"])
    frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    frame["order"] = pd.Categorical(frame["order"], categories=["ab", "ba", "both"])
    frame["label"] = pd.Categorical(frame["label"], categories=["A", "B", "tie"])
    return frame


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sort", [True, False])
def test_judge_position_bias_equals_the_straightforward_one(seed: int, sort: bool) -> None:
    calls = random_calls(seed)
    if sort:
        calls = calls_sort(calls)

    def share(hits: Any, pair_ids: Any, unit: str) -> ClusterProportion:
        # Pairs in groups of 7 as the prompts: both must hand over the same hits and pairs.
        return cluster_proportion(
            hits, pair_ids // 7, unit=unit, resampled="prompt", rounds=50, seed=seed
        )

    fast = position_bias._judge_bias(calls, 0.95, share)

    assert fast == report_baseline.judge_position_bias(calls, 0.95, share)
    assert fast.flip_rate is not None and fast.flip_rate.total > 100


def random_votes(seed: int, pairs: int = 400) -> tuple[pd.DataFrame, pd.DataFrame]:
    """People's votes (several per pair, some pairs without) and one judge's vote per pair
    (some pairs without), with Likert scores that are sometimes missing or half points."""
    rng = np.random.default_rng(seed)
    labels = np.array(["A", "B", "tie"])
    human = pd.DataFrame(
        {
            "pair_id": rng.integers(1, pairs + 1, 3 * pairs),
            "label": pd.Categorical(labels[rng.integers(0, 3, 3 * pairs)], categories=labels),
            "likert": np.where(rng.random(3 * pairs) < 0.8, rng.integers(1, 9, 3 * pairs), np.nan),
        }
    )
    judged = np.sort(rng.choice(np.arange(1, pairs + 30), pairs, replace=False))
    judge = pd.DataFrame(
        {
            "pair_id": judged,
            "label": pd.Categorical(labels[rng.integers(0, 3, pairs)], categories=labels),
            "likert": np.where(rng.random(pairs) < 0.8, rng.integers(2, 17, pairs) / 2, np.nan),
        }
    )
    return human, judge


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappas_equal_the_straightforward_ones(seed: int) -> None:
    human, judge = random_votes(seed)

    fast = agreement._kappas(judge, human, people_majority(human))

    assert fast == report_baseline.kappas(judge, human)
    assert fast[0].units > 300
    assert fast[1].pairs > 500


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fleiss_and_alpha_equal_the_straightforward_ones(seed: int) -> None:
    human, _ = random_votes(seed)
    human.loc[human.sample(frac=0.05, random_state=seed).index, "label"] = np.nan

    fleiss, _ = agreement._reliability(
        human, ReportParams(ci_rounds=5, resample="vote"), pd.Series(dtype="int64")
    )
    fast = dataclasses.replace(fleiss, ci=None)

    assert fast == report_baseline.fleiss(human)
    assert fast.units > 50
    # Alpha with the unit ids numbered by their range equals alpha with them as text labels.
    by_text = human.assign(pair_id=human["pair_id"].map(lambda p: f"pair {p}"))
    levels: list[tuple[str, Literal["nominal", "ordinal"]]] = [
        ("label", "nominal"),
        ("likert", "ordinal"),
    ]
    for column, level in levels:
        assert krippendorff_alpha_from_long(
            human["pair_id"], human[column], level
        ) == pytest.approx(
            krippendorff_alpha_from_long(by_text["pair_id"], by_text[column], level),
            abs=1e-12,
        )
