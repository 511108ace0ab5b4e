"""An independent audit of the MT-Bench report: its values recomputed from the published files
with other people's libraries (scikit-learn, statsmodels, scipy, krippendorff), not Concord's.

The files are read here with the standard library; each unit is (question, unordered model pair,
turn) with answer A the alphabetically first model (the order the import gives the answers), and
"human" is the experts (the report's default rater set when a study has them).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import optimize, stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from leaderboard.services.mtbench_import import MTBENCH_JUDGE_NAME
from tests.leaderboard.mtbench_data import mtbench_dir, mtbench_load
from tests.leaderboard.test_mtbench_table2 import report_for

LABELS = ("A", "B", "tie")
Unit = tuple[int, str, str]


def canonical(row: dict[str, Any]) -> tuple[Unit, str]:
    """A row's unit and its label relative to the alphabetically first model (A)."""
    first, second = sorted((row["model_a"], row["model_b"]))
    winner = {"model_a": row["model_a"], "model_b": row["model_b"]}.get(row["winner"])
    label = "tie" if winner is None else ("A" if winner == first else "B")
    return (row["question_id"], first, second), label


def rows(name: str, turn: int) -> list[dict[str, Any]]:
    lines = (mtbench_dir() / name).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["turn"] == turn]


@pytest.fixture
def audit(db: None, tmp_path: Path) -> dict:
    """The report of MT-Bench turn 1 (bootstrap rounds kept small: no interval is audited
    here), and the files' expert and GPT-4 labels per unit."""
    mtbench_load("mt-bench", 1)
    report, _ = report_for(tmp_path, "--turn=1")
    people: dict[Unit, list[str]] = defaultdict(list)
    for row in rows("human.jsonl", 1):
        if row["judge"].startswith("expert_"):
            unit, label = canonical(row)
            people[unit].append(label)
    gpt4 = dict(canonical(row) for row in rows("gpt4_pair.jsonl", 1))
    return {"report": report, "people": people, "gpt4": gpt4}


def majority(labels: list[str]) -> str:
    """The unique most common label, a tie when two labels share the top count."""
    top = Counter(labels).most_common()
    return top[0][0] if len(top) == 1 or top[0][1] > top[1][1] else "tie"


def test_cohens_kappa_against_the_majority_equals_scikit_learns(audit: dict) -> None:
    units = [u for u in audit["people"] if u in audit["gpt4"]]
    judge = [audit["gpt4"][u] for u in units]
    people = [majority(audit["people"][u]) for u in units]

    reported = audit["report"]["judges"][MTBENCH_JUDGE_NAME]["vs_human"]["cohen_kappa_vs_majority"]

    assert reported["units"] == len(units)
    assert reported["kappa"] == pytest.approx(cohen_kappa_score(judge, people), rel=1e-9)


def test_fleiss_kappa_equals_statsmodels_on_the_units_with_the_modal_vote_count(
    audit: dict,
) -> None:
    counts = {u: [labels.count(c) for c in LABELS] for u, labels in audit["people"].items()}
    rated = {u: c for u, c in counts.items() if sum(c) >= 2}
    modal = Counter(sum(c) for c in rated.values()).most_common(1)[0][0]
    table = np.array([c for c in rated.values() if sum(c) == modal])

    reported = audit["report"]["human_vs_human"]["fleiss_kappa"]

    assert (reported["units"], reported["rated_units"]) == (len(table), len(rated))
    assert reported["votes_per_unit"] == modal
    assert reported["kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"), rel=1e-9)


def test_krippendorffs_alpha_equals_the_krippendorff_package(audit: dict) -> None:
    value_counts = np.array([[lab.count(c) for c in LABELS] for lab in audit["people"].values()])

    expected = krippendorff.alpha(value_counts=value_counts, level_of_measurement="nominal")

    reported = audit["report"]["human_vs_human"]["krippendorff_alpha"]["nominal_preference"]
    assert reported == pytest.approx(expected, rel=1e-9)


def fit_bradley_terry(battles: list[tuple[str, str, float]], ridge: float = 1e-4) -> dict:
    """Bradley-Terry by scipy's L-BFGS on the penalised likelihood (a tie is half a win each):
    minimise sum s log(1 + e^-(t_a - t_b)) + (1 - s) log(1 + e^(t_a - t_b)) + ridge/2 |t|²."""
    models = sorted({m for a, b, _ in battles for m in (a, b)})
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[x] for x, _, _ in battles])
    b = np.array([index[y] for _, y, _ in battles])
    s = np.array([score for _, _, score in battles])

    def loss(t: np.ndarray) -> tuple[float, np.ndarray]:
        d = t[a] - t[b]
        value = (s * np.logaddexp(0, -d) + (1 - s) * np.logaddexp(0, d)).sum() + ridge / 2 * t @ t
        g = (1 / (1 + np.exp(-d))) - s
        grad = np.bincount(a, g, len(models)) - np.bincount(b, g, len(models)) + ridge * t
        return float(value), grad

    fit = optimize.minimize(
        loss,
        np.zeros(len(models)),
        jac=True,
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
    )
    return {m: 1000 + 400 / math.log(10) * fit.x[i] for m, i in index.items()}


def test_bradley_terry_equals_an_independent_scipy_fit(audit: dict) -> None:
    battles = [
        (u[1], u[2], {"A": 1.0, "B": 0.0, "tie": 0.5}[label])
        for u, labels in audit["people"].items()
        for label in labels
    ]

    expected = fit_bradley_terry(battles)

    board = audit["report"]["leaderboards"]["sources"]["human"]["bradley_terry"]
    assert {r["model"] for r in board} == set(expected)
    for row in board:
        assert row["rating"] == pytest.approx(expected[row["model"]], abs=1e-3)


def test_rank_correlations_equal_scipys_on_the_reported_ratings(audit: dict) -> None:
    sources = audit["report"]["leaderboards"]["sources"]
    human = {r["model"]: r["rating"] for r in sources["human"]["bradley_terry"]}
    judge = {r["model"]: r["rating"] for r in sources[MTBENCH_JUDGE_NAME]["bradley_terry"]}
    models = sorted(set(human) & set(judge))
    x, y = [human[m] for m in models], [judge[m] for m in models]

    (pair,) = audit["report"]["leaderboards"]["rank_correlation"]

    assert pair["spearman"]["estimate"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-9)
    assert pair["kendall"]["estimate"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-9)


def test_per_category_spearman_equals_scipys(audit: dict) -> None:
    lines = (mtbench_dir() / "mt_bench_question.jsonl").read_text().splitlines()
    category = {q["question_id"]: q["category"] for q in map(json.loads, lines)}
    sign = {"A": -1.0, "tie": 0.0, "B": 1.0}

    for entry in audit["report"]["per_category"]["categories"]:
        units = [
            u for u in audit["people"] if u in audit["gpt4"] and category[u[0]] == entry["category"]
        ]
        xs = [np.mean([sign[v] for v in audit["people"][u]]) for u in units]
        ys = [sign[audit["gpt4"][u]] for u in units]
        reported = entry["judges"][MTBENCH_JUDGE_NAME]["spearman"]
        assert reported["n"] == len(units)
        assert reported["estimate"] == pytest.approx(stats.spearmanr(xs, ys).statistic, abs=1e-9)


def test_inconsistent_share_and_its_wilson_interval_equal_statsmodels(audit: dict) -> None:
    verdicts = rows("gpt4_pair.jsonl", 1)
    marked = sum("inconsistent" in r["winner"] for r in verdicts)

    share = audit["report"]["position_bias"][MTBENCH_JUDGE_NAME]["inconsistent"]

    lower, upper = proportion_confint(marked, len(verdicts), alpha=0.05, method="wilson")
    assert (share["count"], share["total"]) == (marked, len(verdicts))
    assert (share["lower"], share["upper"]) == pytest.approx((lower, upper), abs=1e-9)
