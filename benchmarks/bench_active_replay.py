"""MT-Bench's human votes replayed in random order and in active order (issue 29).

The pool is MT-Bench's 3,355 human votes (`human.jsonl` in the shared data: the 58 experts'
2,668 and the authors' 687; `--experts` keeps the experts only), each on a unit (question,
pair of models, turn) that GPT-4 judged in both orders (`gpt4_pair.jsonl`). GPT-4's verdict is
the judge label (an inconsistent pair of orders counts as a tie, as in the paper's S1), and its
inconsistency is the unit's judge disagreement (the data has one judge; its two orders disagree
or not). For each seed the votes are revealed in a random order and in the order of
`leaderboard.stats.replay.replay_order(policy="active")`, and after each number of labels the
script prints GPT-4's agreement with people (LURE-weighted for the active order), the width of
its 95% interval over the 80 questions, and Kendall's tau-b of the people's Bradley-Terry
leaderboard against the one on all the votes; then the labels at which the active order first
stays at or below the random order's final width.

    .venv/bin/python benchmarks/bench_active_replay.py [--seeds 3] [--rounds 1000] [--experts]

Not part of the test suite's pass or fail; docs/active.md shows a run's output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leaderboard.stats.replay import (  # noqa: E402
    ReplayCurve,
    ReplayPool,
    replay_curve,
    replay_order,
)
from tests.leaderboard.mtbench_data import mtbench_dir  # noqa: E402

FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Models in name order, the winner flipped to match; 'tie (inconsistent)' kept apart."""
    swap = frame["model_a"] > frame["model_b"]
    first = frame["model_a"].where(~swap, frame["model_b"])
    second = frame["model_b"].where(~swap, frame["model_a"])
    winner = frame["winner"]
    label = np.where(
        winner.str.startswith("tie"),
        "tie",
        np.where((winner == "model_a") ^ swap, "A", "B"),
    )
    return frame.assign(system_a=first, system_b=second, label=label)


def mtbench_pool(folder: Path, *, experts_only: bool) -> ReplayPool:
    """The replay pool: one row per human vote, with GPT-4's verdict on its unit."""
    human = _canonical(pd.read_json(folder / "human.jsonl", lines=True))
    if experts_only:
        human = human[human["judge"].str.startswith("expert_")]
    gpt4 = _canonical(pd.read_json(folder / "gpt4_pair.jsonl", lines=True))
    gpt4 = gpt4.assign(judge_disagreement=(gpt4["winner"] == "tie (inconsistent)").astype(float))
    questions = pd.read_json(folder / "mt_bench_question.jsonl", lines=True)
    keys = ["question_id", "system_a", "system_b", "turn"]
    merged = human.merge(
        gpt4[[*keys, "label", "judge_disagreement"]].rename(columns={"label": "judge_label"}),
        on=keys,
        how="inner",
        validate="many_to_one",
    ).merge(questions[["question_id", "category"]], on="question_id", validate="many_to_one")
    if len(merged) != len(human):
        raise SystemExit(f"{len(human) - len(merged)} human votes have no GPT-4 verdict")
    unit = (
        merged["question_id"].astype(str)
        + "|" + merged["system_a"] + "|" + merged["system_b"]
        + "|" + merged["turn"].astype(str)
    )  # fmt: skip
    return ReplayPool(
        merged.assign(unit=unit, prompt=merged["question_id"])[list(ReplayPool.COLUMNS)]
    )


def _mean_curve(curves: list[ReplayCurve]) -> list[tuple[int, float, float, float]]:
    rows = []
    for i, point in enumerate(curves[0].points):
        same = [c.points[i] for c in curves]
        rows.append(
            (
                point.labels,
                float(np.mean([p.agreement for p in same])),
                float(np.mean([p.width for p in same])),
                float(np.mean([p.kendall_tau for p in same])),
            )
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="replays per order (default 3)")
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds per point")
    parser.add_argument("--random-share", type=float, default=0.2)
    parser.add_argument("--experts", action="store_true", help="the experts' votes only")
    parser.add_argument("--json", type=Path, help="also write the curves here")
    args = parser.parse_args()

    pool = mtbench_pool(mtbench_dir(), experts_only=args.experts)
    n = len(pool)
    sizes = [max(1, round(n * f)) for f in FRACTIONS]
    curves: dict[str, list[ReplayCurve]] = {"random": [], "active": []}
    began = time.perf_counter()
    for seed in range(args.seeds):
        for policy in ("random", "active"):
            order, propensity = replay_order(
                pool, policy=policy, seed=seed, random_share=args.random_share
            )
            curves[policy].append(
                replay_curve(
                    pool,
                    order,
                    propensity,
                    policy=policy,
                    seed=seed,
                    sizes=sizes,
                    rounds=args.rounds,
                )  # fmt: skip
            )
    print(f"MT-Bench replay: {n} human votes, {args.seeds} seeds per order, "
          f"random share {args.random_share:.0%}, {time.perf_counter() - began:.1f} s")  # fmt: skip
    means = {policy: _mean_curve(c) for policy, c in curves.items()}
    print(f"{'labels':>7} {'share':>6} | {'random: agreement':>18} {'width':>7} {'tau':>6} | "
          f"{'active: agreement':>18} {'width':>7} {'tau':>6}")  # fmt: skip
    for r, a in zip(means["random"], means["active"], strict=True):
        print(f"{r[0]:>7} {r[0] / n:>6.0%} | {r[1]:>18.4f} {r[2]:>7.4f} {r[3]:>6.3f} | "
              f"{a[1]:>18.4f} {a[2]:>7.4f} {a[3]:>6.3f}")  # fmt: skip
    final = means["random"][-1][2]
    reached = next(
        (
            row[0]
            for k, row in enumerate(means["active"])
            if all(later[2] <= final for later in means["active"][k:])
        ),
        None,
    )
    share = "never" if reached is None else f"{reached} labels ({reached / n:.0%})"
    print(f"random order's final width {final:.4f}; the active order stays within it from: {share}")
    if args.json:
        args.json.write_text(json.dumps(means, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
