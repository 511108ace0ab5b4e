"""Time bootstrapped Elo against per-battle Python loops on the same draws, and Bradley-Terry.

Run from the repository root:  PYTHONPATH=. python benchmarks/bench_elo.py [--rounds 100]

It times elo_bootstrap with each engine available (numba's compiled loop, numpy lockstep).
Baselines, both replaying exactly the bootstrap samples that ``elo_bootstrap`` draws:
- "notebook loop": the LMSYS Chatbot Arena notebook's procedure as written there (a pandas sample
  per round, ``itertuples`` and a ``defaultdict`` of ratings);
- "plain loop": the same update over Python lists, the fastest straightforward pure-Python form.
Timings are wall-clock in this process; ratios compare runs made here, one after another.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import defaultdict

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.stats import ratings
from leaderboard.stats.ratings import (
    bootstrap_battle_indices,
    bradley_terry,
    canonical_battle_order,
    elo_bootstrap,
)

SCORE_A = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}


def make_battles(n: int, models: int, seed: int) -> pd.DataFrame:
    """Random battles among models whose true Elo strengths are spread over about 400 points."""
    rng = np.random.default_rng(seed)
    names = np.array([f"model-{i:02d}" for i in range(models)])
    strength = rng.normal(1000, 100, models)
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    p_a = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 400))
    u = rng.random(n)
    winner = np.where(u < 0.2, "tie", np.where(u < 0.2 + 0.8 * p_a, "model_a", "model_b"))
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def notebook_loop(battles: pd.DataFrame, samples: npt.NDArray[np.int64]) -> pd.Series:
    rows = []
    for sample in samples:
        rating: defaultdict[str, float] = defaultdict(lambda: 1000.0)
        shuffled = battles.iloc[sample]
        for _, model_a, model_b, winner in shuffled[["model_a", "model_b", "winner"]].itertuples():
            ra, rb = rating[model_a], rating[model_b]
            ea = 1 / (1 + 10 ** ((rb - ra) / 400))
            eb = 1 / (1 + 10 ** ((ra - rb) / 400))
            sa = SCORE_A[winner]
            rating[model_a] += 4 * (sa - ea)
            rating[model_b] += 4 * (1 - sa - eb)
        rows.append(rating)
    return pd.DataFrame(rows).median()


def plain_loop(battles: pd.DataFrame, samples: npt.NDArray[np.int64]) -> pd.Series:
    model_a = battles["model_a"].tolist()
    model_b = battles["model_b"].tolist()
    score = [SCORE_A[w] for w in battles["winner"]]
    rows = []
    for sample in samples:
        rating: dict[str, float] = {}
        for i in sample.tolist():
            ma, mb = model_a[i], model_b[i]
            ra, rb = rating.get(ma, 1000.0), rating.get(mb, 1000.0)
            delta = 4 * (score[i] - 1 / (1 + 10 ** ((rb - ra) / 400)))
            rating[ma] = ra + delta
            rating[mb] = rb - delta
        rows.append(rating)
    return pd.DataFrame(rows).median()


FRESH = """
import sys, time
start = time.perf_counter()
from benchmarks.bench_elo import make_battles
from leaderboard.stats.ratings import elo_bootstrap, elo_kernel_warm
battles = make_battles(int(sys.argv[1]), int(sys.argv[2]), 0)
if sys.argv[4] == "warm-start":
    elo_kernel_warm()  # what each analysis worker process does as it starts
ready = time.perf_counter()
elo_bootstrap(battles, rounds=int(sys.argv[3]))
first = time.perf_counter()
elo_bootstrap(battles, rounds=int(sys.argv[3]))
second = time.perf_counter()
print(f"{ready - start:.3f} {first - ready:.3f} {second - first:.3f}")
"""


def fresh_process(battles: int, models: int, rounds: int) -> None:
    """Time the first and a second Elo bootstrap in new processes: the kernel's machine code
    comes from numba's on-disk cache (filled by the first process on a machine), and the
    analysis worker loads it as each process starts (``elo_kernel_warm``)."""
    for start_mode in ("cold-start", "warm-start", "warm-start"):
        out = subprocess.run(
            [sys.executable, "-c", FRESH, str(battles), str(models), str(rounds), start_mode],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        ready, first, second = (float(v) for v in out)
        print(
            f"new process, {start_mode}: start {ready:6.2f} s, first report's Elo {first:6.3f} s,"
            f" second {second:6.3f} s, first / second {first / second:5.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=50_000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-notebook-loop", action="store_true")
    parser.add_argument(
        "--fresh-process",
        action="store_true",
        help="only time the first Elo bootstrap of new processes against a second one",
    )
    args = parser.parse_args()
    if args.fresh_process:
        fresh_process(args.battles, args.models, args.rounds)
        return

    battles = make_battles(args.battles, args.models, args.seed)
    print(f"{args.battles} battles, {args.models} models, {args.rounds} rounds, seed {args.seed}")

    engines = ["numba", "numpy"] if ratings.HAVE_NUMBA else ["numpy"]
    timings: dict[str, float] = {}
    results: dict[str, pd.Series] = {}
    for engine in engines:
        ratings._ENGINE = engine  # type: ignore[assignment]
        if engine == "numba":
            start = time.perf_counter()
            elo_bootstrap(battles.head(10), rounds=2)
            print(f"numba compile (once per process): {time.perf_counter() - start:6.2f} s")
        start = time.perf_counter()
        result = elo_bootstrap(battles, rounds=args.rounds, seed=args.seed)
        timings[engine] = time.perf_counter() - start
        results[engine] = result.set_index("model")["rating"]
        print(f"elo_bootstrap, {engine + ' engine:':19} {timings[engine]:8.2f} s")

    # The engines' draws, as row positions of `battles` (they number battles in canonical order).
    order = canonical_battle_order(battles)
    samples = order[bootstrap_battle_indices(len(battles), args.rounds, args.seed)]
    baselines = [("plain loop", plain_loop)]
    if not args.skip_notebook_loop:
        baselines.append(("notebook loop", notebook_loop))
    for name, baseline in baselines:
        start = time.perf_counter()
        medians = baseline(battles, samples)
        elapsed = time.perf_counter() - start
        print(f"{name + ':':31} {elapsed:8.2f} s")
        for engine in engines:
            diff = float((results[engine] - medians[results[engine].index]).abs().max())
            print(
                f"    vs {engine:6} engine: speed-up {elapsed / timings[engine]:6.1f}x,"
                f" max |median difference| {diff:.2e}"
            )

    start = time.perf_counter()
    bradley_terry(battles, rounds=args.rounds, seed=args.seed)
    print(f"bradley_terry, {args.rounds} bootstrap rounds: {time.perf_counter() - start:6.2f} s")


if __name__ == "__main__":
    main()
