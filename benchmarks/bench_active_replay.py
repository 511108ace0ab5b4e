"""MT-Bench's human votes replayed in random order and in active order (issue 29).

The pool is MT-Bench's 3,355 human votes (`human.jsonl` in the shared data: the 58 experts'
2,668 and the authors' 687; `--experts` keeps the experts only), each on a unit (question,
pair of models, turn) that GPT-4 judged in both orders (`gpt4_pair.jsonl`). GPT-4's verdict is
the judge label (an inconsistent pair of orders counts as a tie, as in the paper's S1), and its
inconsistency is the unit's judge disagreement (the data has one judge; its two orders disagree
or not). For each seed the votes are revealed in four orders of
`leaderboard.stats.replay.replay_order`: random, active (the four-term priority the analysis
worker stored before Neyman's allocation), neyman (in proportion to the agreement's standard
deviation in the vote's stratum) and live (the priority the analysis worker stores today,
`leaderboard.stats.active.neyman_priority`: the same allocation with its floor). After each
number of labels the script prints, for six curves (random with the plain rate; active and
live with the LURE mean; active, neyman and live post-stratified by GPT-4's verdict strata, as
the report of an active study shows it), the width of the 95%
interval of GPT-4's agreement with people over the 80 questions; then the agreement estimates
and Kendall's tau-b of the people's Bradley-Terry leaderboard against the one on all the votes;
then, per curve, the labels from which it stays at or below the random order's final width and
its width at 60% of the labels; last, the floor no unbiased design can beat at 60%
(`no_design_floor`).

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
    Estimator,
    Policy,
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


CURVES: tuple[tuple[str, Policy, Estimator], ...] = (
    # (name, order, estimator)
    ("random", "random", "weighted"),
    ("active", "active", "weighted"),
    ("active, post-stratified", "active", "poststratified"),
    ("neyman, post-stratified", "neyman", "poststratified"),
    ("live", "live", "weighted"),
    ("live, post-stratified", "live", "poststratified"),
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


def _reached(rows: list[tuple[int, float, float, float]], width: float) -> int | None:
    """The fewest labels from which on the mean width stays at most ``width``."""
    return next(
        (row[0] for k, row in enumerate(rows) if all(later[2] <= width for later in rows[k:])),
        None,
    )


def no_design_floor(pool: ReplayPool, fraction: float, z: float = 1.959964) -> float:
    """The narrowest mean 95% width any unbiased design could reach with ``fraction`` of the
    votes, even one that knew each unit's agreement probability p_u: the whole pool's
    prompt-bootstrap variance V plus the label noise no design removes,
    ``V + (1 / f - 1) E[p (1 - p)] / N`` (Poisson sampling at rate f; Neyman's allocation gains
    nothing when every vote's noise is the same, and little here). ``E[p (1 - p)] = E[p] -
    E[p^2]``, with ``E[p^2]`` the rate at which two votes on the same unit both agree with the
    judge (units with two votes or more)."""
    frame = pool.frame
    agree = (frame["label"] == frame["judge_label"]).astype(float)
    n, mean = len(frame), float(agree.mean())
    per_prompt = agree.groupby(frame["prompt"]).agg(["sum", "size"])
    variance = float(((per_prompt["sum"] - mean * per_prompt["size"]) ** 2).sum()) / n**2
    units = agree.groupby(frame["unit"]).agg(["sum", "size"])
    units = units[units["size"] >= 2]
    both = float(
        (units["sum"] * (units["sum"] - 1) / (units["size"] - 1)).sum() / units["size"].sum()
    )
    noise = mean - both
    return float(2 * z * np.sqrt(variance + (1 / fraction - 1) * noise / n))


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
    curves: dict[str, list[ReplayCurve]] = {name: [] for name, _, _ in CURVES}
    began = time.perf_counter()
    for seed in range(args.seeds):
        orders = {
            policy: replay_order(pool, policy=policy, seed=seed, random_share=args.random_share)
            for policy in ("random", "active", "neyman", "live")
        }
        for name, policy, estimator in CURVES:
            order, propensity = orders[policy]
            curves[name].append(
                replay_curve(
                    pool,
                    order,
                    propensity,
                    policy=policy,
                    seed=seed,
                    sizes=sizes,
                    rounds=args.rounds,
                    estimator=estimator,
                )  # fmt: skip
            )
    print(f"MT-Bench replay: {n} human votes, {args.seeds} seeds per order, "
          f"random share {args.random_share:.0%}, {time.perf_counter() - began:.1f} s")  # fmt: skip
    means = {name: _mean_curve(c) for name, c in curves.items()}
    print("width of the 95% interval of GPT-4's agreement with people (mean over seeds)")
    print(f"{'labels':>7} {'share':>6} | " + " | ".join(f"{name:>23}" for name in means))
    for k, row in enumerate(means["random"]):
        widths = " | ".join(f"{means[name][k][2]:>23.4f}" for name in means)
        print(f"{row[0]:>7} {row[0] / n:>6.0%} | {widths}")
    print("agreement estimate and Kendall tau of the people's leaderboard against the full one")
    print(f"{'labels':>7} | {'random: agreement':>18} {'tau':>6} | "
          f"{'active: agreement':>18} {'post-strat.':>11} {'tau':>6} | "
          f"{'live: post-strat.':>18} {'tau':>6}")  # fmt: skip
    for r, a, p, live in zip(
        means["random"],
        means["active"],
        means["active, post-stratified"],
        means["live, post-stratified"],
        strict=True,
    ):
        print(f"{r[0]:>7} | {r[1]:>18.4f} {r[3]:>6.3f} | {a[1]:>18.4f} {p[1]:>11.4f} {a[3]:>6.3f}"
              f" | {live[1]:>18.4f} {live[3]:>6.3f}")  # fmt: skip
    final = means["random"][-1][2]
    print(f"random order's final width {final:.4f}; each curve stays within it from:")
    for name, rows in means.items():
        reached = _reached(rows, final)
        at = next(row[2] for row in rows if row[0] == round(n * 0.6))
        share = "never" if reached is None else f"{reached} labels ({reached / n:.0%})"
        print(f"  {name:>23}: {share}; width at 60% of the labels {at:.4f}")
    print(f"no design's floor at 60% of the labels (see no_design_floor): "
          f"{no_design_floor(pool, 0.6):.4f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(means, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
