"""Time bootstrapped Elo against per-battle Python loops on the same draws, and Bradley-Terry.

Run from the repository root:  PYTHONPATH=. python benchmarks/bench_elo.py [--rounds 100]

It times elo_bootstrap (the compiled kernel) resampling battles and resampling prompts (each
battle given one of ``--prompts`` prompts at random). Baselines, both replaying exactly the
battle bootstrap's samples:
- "plain loop": the per-battle reference the tests check the kernel against
  (``tests/leaderboard/reference_elo.py``, imported rather than copied, so that the benchmark
  times the very loop the tests trust);
- "notebook loop": the LMSYS Chatbot Arena notebook's procedure as written there (a pandas sample
  per round, ``itertuples`` and a ``defaultdict`` of ratings), kept here as the benchmark's own
  baseline: it is the form people run, not a reference.
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

from leaderboard.stats.bradley_terry import bradley_terry
from leaderboard.stats.elo import canonical_battle_order, elo_bootstrap
from leaderboard.stats.elo_kernel import bootstrap_battle_indices
from tests.leaderboard.reference_elo import online_elo

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
    rows = list(battles[["model_a", "model_b", "winner"]].itertuples(index=False, name=None))
    return pd.DataFrame([online_elo(rows, sample.tolist()) for sample in samples]).median()


FRESH = """
import sys, time
start = time.perf_counter()
from benchmarks.bench_elo import make_battles
from leaderboard.stats.elo import elo_bootstrap, elo_kernel_warm
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
    parser.add_argument("--prompts", type=int, default=2_500)
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
    prompts = np.random.default_rng(args.seed).integers(0, args.prompts, args.battles)
    print(
        f"{args.battles} battles, {args.models} models, {args.prompts} prompts,"
        f" {args.rounds} rounds, seed {args.seed}"
    )

    start = time.perf_counter()
    elo_bootstrap(battles.head(10), rounds=2)
    elo_bootstrap(battles.head(10), rounds=2, clusters=prompts[:10])
    print(f"numba compile or cache load (once per process): {time.perf_counter() - start:6.2f} s")
    start = time.perf_counter()
    result = elo_bootstrap(battles, rounds=args.rounds, seed=args.seed)
    kernel = time.perf_counter() - start
    print(f"elo_bootstrap, battles resampled:  {kernel:8.2f} s")
    start = time.perf_counter()
    elo_bootstrap(battles, rounds=args.rounds, seed=args.seed, clusters=prompts)
    by_prompt = time.perf_counter() - start
    print(f"elo_bootstrap, prompts resampled:  {by_prompt:8.2f} s ({by_prompt / kernel:.2f}x)")
    medians_fast = result.set_index("model")["rating"]

    # The kernel's draws, as row positions of `battles` (it numbers battles in canonical order).
    order = canonical_battle_order(battles)
    samples = order[bootstrap_battle_indices(len(battles), args.rounds, args.seed)]
    baselines = [("plain loop", plain_loop)]
    if not args.skip_notebook_loop:
        baselines.append(("notebook loop", notebook_loop))
    for name, baseline in baselines:
        start = time.perf_counter()
        medians = baseline(battles, samples)
        elapsed = time.perf_counter() - start
        diff = float((medians_fast - medians[medians_fast.index]).abs().max())
        print(
            f"{name + ':':34} {elapsed:8.2f} s: speed-up {elapsed / kernel:6.1f}x,"
            f" max |median difference| {diff:.2e}"
        )

    start = time.perf_counter()
    bradley_terry(battles, rounds=args.rounds, seed=args.seed)
    print(f"bradley_terry, {args.rounds} bootstrap rounds: {time.perf_counter() - start:6.2f} s")


if __name__ == "__main__":
    main()
