"""Reproduce Table 2 of Zheng et al. (2023) from the published MT-Bench judgment labels."""

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from leaderboard.stats.agreement import pairwise_agreement
from leaderboard.stats.mtbench import canonical_label, canonicalize_votes

DATA_NAME = "mt_bench_human_judgments"


def data_dir() -> Path:
    beside_repo = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / DATA_NAME
    if beside_repo.is_dir():
        return beside_repo
    from_env = os.environ.get("CONCORD_SHARED_DATA")
    if from_env:
        candidate = Path(from_env)
        for path in (candidate, candidate / DATA_NAME, candidate / "data" / DATA_NAME):
            if (path / "human.jsonl").is_file():
                return path
    pytest.fail(
        f"MT-Bench judgment data not found at {beside_repo} and CONCORD_SHARED_DATA is "
        f"{from_env!r}; check out the repository beside shared/ or point CONCORD_SHARED_DATA "
        f"at shared/, shared/data or shared/data/{DATA_NAME}"
    )


def load(name: str) -> list[dict[str, Any]]:
    with (data_dir() / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="module")
def humans() -> pd.DataFrame:
    return canonicalize_votes(load("human.jsonl"))


@pytest.fixture(scope="module")
def gpt4() -> pd.DataFrame:
    return canonicalize_votes(load("gpt4_pair.jsonl"))


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


def test_canonical_votes_keep_experts_only_and_sort_the_model_pair(humans: pd.DataFrame) -> None:
    assert set(humans["source"]) == {"expert"}
    assert (humans["model_1"] < humans["model_2"]).all()
    assert set(humans["label"]) == {"A", "B", "tie"}


def test_authors_are_kept_only_on_request() -> None:
    with_authors = canonicalize_votes(load("human.jsonl"), include_authors=True)

    assert "author" in set(with_authors["source"])


@pytest.mark.parametrize(
    ("winner", "swapped", "label"),
    [
        ("model_a", False, "A"),
        ("model_b", False, "B"),
        ("model_a", True, "B"),
        ("model_b", True, "A"),
        ("tie", True, "tie"),
        ("tie (inconsistent)", False, "tie"),
    ],
)
def test_winner_is_flipped_when_the_pair_is_put_in_canonical_order(
    winner: str, swapped: bool, label: str
) -> None:
    assert canonical_label(winner, swapped=swapped) == label


def test_a_swapped_record_gets_the_same_key_and_the_flipped_label() -> None:
    record = {"question_id": 81, "turn": 1, "judge": "expert_1", "winner": "model_a"}
    forward = canonicalize_votes([{**record, "model_a": "alpaca-13b", "model_b": "gpt-4"}])
    backward = canonicalize_votes([{**record, "model_a": "gpt-4", "model_b": "alpaca-13b"}])

    assert forward["key"].iloc[0] == backward["key"].iloc[0] == (81, "alpaca-13b", "gpt-4", 1)
    assert (forward["label"].iloc[0], backward["label"].iloc[0]) == ("A", "B")
