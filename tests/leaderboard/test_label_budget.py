"""The label budget section and planner, checked on MT-Bench's published labels against a
computation straight from the files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from scipy import stats

from leaderboard.report.label_budget import (
    SECTION,
    LabelBudgetResult,
    label_budget_plan,
)
from leaderboard.services.mtbench_import import MTBENCH_JUDGE_NAME
from tests.leaderboard.mtbench_data import mtbench_dir, mtbench_load

FAST = ["--elo-rounds=5", "--bt-rounds=5", "--ci-rounds=20"]


def _report(tmp_path: Path) -> dict:
    output = tmp_path / "report.json"
    call_command("agreement_report", "--study=mt-bench", f"--output={output}", "--turn=1", *FAST)
    return json.loads(output.read_bytes())


def _agreement_by_question() -> pd.DataFrame:
    """Each expert vote of turn 1 with GPT-4's verdict on its unit: agree 1 or 0 (any tie equals
    any tie, as in Table 2's S1), by question."""
    folder = mtbench_dir()

    def winners(name: str, keep: str) -> pd.DataFrame:
        rows = []
        for line in (folder / name).read_text().splitlines():
            row = json.loads(line)
            if row["turn"] != 1 or not row["judge"].startswith(keep):
                continue
            first, second = sorted((row["model_a"], row["model_b"]))
            named = {"model_a": row["model_a"], "model_b": row["model_b"]}.get(row["winner"])
            rows.append(
                {
                    "question_id": row["question_id"],
                    "first": first,
                    "second": second,
                    "winner": "tie" if named is None else named,
                }
            )
        return pd.DataFrame(rows)

    people = winners("human.jsonl", "expert_")
    gpt4 = winners("gpt4_pair.jsonl", "gpt4_pair")
    both = people.merge(gpt4, on=["question_id", "first", "second"], suffixes=("", "_gpt4"))
    return both.assign(agree=(both["winner"] == both["winner_gpt4"]).astype(float))


def test_gpt4s_budget_is_its_table_2_agreement_split_by_question_as_anova_splits_it(
    db: None, tmp_path: Path
) -> None:
    mtbench_load("mt-bench", 1)
    report = _report(tmp_path)
    budget = report["label_budget"]["judges"][MTBENCH_JUDGE_NAME]
    votes = _agreement_by_question()
    assert budget["comparisons"] == len(votes) == 1343  # Table 2's GPT-4 vs human count
    assert budget["components"]["mean"] == pytest.approx(votes["agree"].mean())
    # One-way ANOVA by hand (statsmodels-free): mean squares within and between questions.
    groups = votes.groupby("question_id")["agree"]
    n, c = len(votes), groups.ngroups
    msw = float(((votes["agree"] - groups.transform("mean")) ** 2).sum()) / (n - c)
    sizes = groups.size()
    msb = float((sizes * (groups.mean() - votes["agree"].mean()) ** 2).sum()) / (c - 1)
    n0 = (n - float((sizes**2).sum()) / n) / (c - 1)
    assert budget["components"]["within"] == pytest.approx(msw)
    assert budget["components"]["between"] == pytest.approx(max(0.0, (msb - msw) / n0))
    assert budget["components"]["prompts"] == c
    z = stats.norm.ppf(0.975)
    now = z * math.sqrt(max(0.0, (msb - msw) / n0) / c + msw / n)
    assert budget["half_width"] == pytest.approx(now)
    widths = [p["half_width"] for p in budget["points"]]
    assert widths == sorted(widths, reverse=True)
    assert budget["floor_half_width"] < widths[-1]
    taus = [p["kendall_tau"] for p in report["label_budget"]["stability"]]
    assert all(-1.0 <= t <= 1.0 for t in taus)
    assert taus[-1] >= taus[0]  # 8x the votes steadies the leaderboard at least as much


def _result() -> LabelBudgetResult:
    from leaderboard.report.base import from_json

    payload = {
        "definition": "",
        "confidence": 0.95,
        "human_votes": 1000,
        "stability": [],
        "judges": {
            "gpt": {
                "comparisons": 2000,
                "per_vote": 2.0,
                "components": {
                    "mean": 0.7,
                    "between": 0.01,
                    "within": 0.2,
                    "labels": 2000,
                    "prompts": 100,
                },
                "half_width": 0.0,
                "floor_half_width": 0.0,
                "points": [],
            }
        },
    }
    return from_json(LabelBudgetResult, payload)


def test_the_planner_prices_the_votes_a_target_needs() -> None:
    result = _result()
    answer = label_budget_plan(result, judge="gpt", target_half_width=0.03, cents_per_judgment=15)
    # Comparisons for ± 0.03: 0.2 / ((0.03 / 1.96)^2 - 0.01 / 100) = 1,494.1 -> 1,495 comparisons
    # = 748 votes at 2 comparisons a vote; the study has 1,000, so none more is needed.
    z = stats.norm.ppf(0.975)
    comparisons = math.ceil(0.2 / ((0.03 / z) ** 2 - 0.01 / 100))
    assert answer.votes_needed == math.ceil(comparisons / 2)
    assert answer.additional_votes == 0 and answer.cost_cents == 0
    tighter = label_budget_plan(result, judge="gpt", target_half_width=0.022, cents_per_judgment=15)
    needed = math.ceil(math.ceil(0.2 / ((0.022 / z) ** 2 - 0.01 / 100)) / 2)
    assert tighter.votes_needed == needed
    assert tighter.additional_votes == needed - 1000
    assert tighter.cost_cents == (needed - 1000) * 15


def test_a_target_below_the_floor_is_out_of_reach_unless_more_prompts_are_planned() -> None:
    result = _result()
    floor = stats.norm.ppf(0.975) * math.sqrt(0.01 / 100)
    answer = label_budget_plan(result, judge="gpt", target_half_width=0.015, cents_per_judgment=15)
    assert answer.floor_half_width == pytest.approx(floor) and floor > 0.015
    assert answer.votes_needed is None and answer.cost_cents is None
    pilot = label_budget_plan(
        result, judge="gpt", target_half_width=0.015, cents_per_judgment=15, prompts=400
    )
    assert pilot.votes_needed is not None and pilot.floor_half_width < 0.015
    with pytest.raises(ValueError, match="cover 100 prompts"):
        label_budget_plan(
            result, judge="gpt", target_half_width=0.03, cents_per_judgment=1, prompts=5
        )
    with pytest.raises(KeyError):
        label_budget_plan(result, judge="nobody", target_half_width=0.03, cents_per_judgment=1)


def test_the_section_is_registered_with_its_table_and_plot() -> None:
    from leaderboard.report.base import RenderContext
    from leaderboard.report.registry import SECTIONS

    assert SECTION in SECTIONS
    result = _result()
    context = RenderContext(("human", "gpt"), "")
    names = [t.name for t in SECTION.tables(result, context)]
    assert names == ["label-budget", "leaderboard-stability"]
    assert np.isfinite(result.judges["gpt"].components.within)
