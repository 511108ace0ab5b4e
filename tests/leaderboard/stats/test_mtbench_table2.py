"""Reproduce Table 2 of Zheng et al. (2023) from the published MT-Bench judgment labels with the
statistic alone, the labels put in canonical order here (independently of the import)."""

import json
from typing import Any

import pandas as pd
import pytest

from leaderboard.stats.agreement import pairwise_agreement
from tests.leaderboard.mtbench_data import mtbench_dir


def canonical_votes(name: str, *, keep: str) -> pd.DataFrame:
    """The file's votes by judges whose id starts with `keep`, one row each: the unit key
    (question, the two models sorted, turn), the label in that order (A: the first model won;
    any label with "tie" in it is a tie, as the paper's S1) and the judge as rater."""
    rows: list[dict[str, Any]] = []
    with (mtbench_dir() / name).open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if not record["judge"].startswith(keep):
                continue
            first, second = sorted((record["model_a"], record["model_b"]))
            winner = {"model_a": record["model_a"], "model_b": record["model_b"]}.get(
                record["winner"]
            )
            assert winner is not None or "tie" in record["winner"], record
            label = "tie" if winner is None else ("A" if winner == first else "B")
            turn = int(record["turn"])
            rows.append(
                {
                    "key": (int(record["question_id"]), first, second, turn),
                    "turn": turn,
                    "label": label,
                    "rater": record["judge"],
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def humans() -> pd.DataFrame:
    # The paper's "human" is the experts; the authors' votes are left out.
    return canonical_votes("human.jsonl", keep="expert_")


@pytest.fixture(scope="module")
def gpt4() -> pd.DataFrame:
    return canonical_votes("gpt4_pair.jsonl", keep="gpt4_pair")


# (turn, S1 percent, S1 count, S2 percent, S2 count), from the data README and the paper.
GPT4_VS_HUMAN = [(1, 66, 1343, 85, 859), (2, 66, 1325, 85, 864)]
HUMAN_VS_HUMAN = [(1, 63, 721, 81, 479), (2, 67, 707, 82, 474)]


@pytest.mark.parametrize(("turn", "s1_pct", "s1_n", "s2_pct", "s2_n"), GPT4_VS_HUMAN)
def test_gpt4_pair_vs_expert_agreement_reproduces_mt_bench_table_2(
    humans: pd.DataFrame,
    gpt4: pd.DataFrame,
    turn: int,
    s1_pct: int,
    s1_n: int,
    s2_pct: int,
    s2_n: int,
) -> None:
    result = pairwise_agreement(gpt4[gpt4["turn"] == turn], humans[humans["turn"] == turn])

    assert (result.s1.total, result.s2.total) == (s1_n, s2_n)
    assert result.s1.rate is not None and result.s2.rate is not None
    assert (round(100 * result.s1.rate), round(100 * result.s2.rate)) == (s1_pct, s2_pct)


@pytest.mark.parametrize(("turn", "s1_pct", "s1_n", "s2_pct", "s2_n"), HUMAN_VS_HUMAN)
def test_expert_vs_expert_agreement_reproduces_mt_bench_table_2(
    humans: pd.DataFrame, turn: int, s1_pct: int, s1_n: int, s2_pct: int, s2_n: int
) -> None:
    result = pairwise_agreement(humans[humans["turn"] == turn])

    assert (result.s1.total, result.s2.total) == (s1_n, s2_n)
    assert result.s1.rate is not None and result.s2.rate is not None
    assert (round(100 * result.s1.rate), round(100 * result.s2.rate)) == (s1_pct, s2_pct)
