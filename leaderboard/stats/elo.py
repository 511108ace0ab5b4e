"""Online Elo ratings of models from pairwise battles, with bootstrap percentiles.

The LMSYS Chatbot Arena notebook's procedure (Zheng et al. 2023, as followed by the Hugging Face
H4 study "Can foundation models label data like humans?", 2023): the Elo update of A. Elo (1978),
"The Rating of Chessplayers, Past and Present", replayed over bootstrap resamples of the battles,
or of the prompts (the cluster bootstrap: Efron & Tibshirani 1993, "An Introduction to the
Bootstrap", section 8.5). :func:`elo_bootstrap` states the formula; this module numbers the
battles in canonical order, builds the tables the compiled kernels read
(:mod:`leaderboard.stats.elo_kernel`) and spreads the rounds over threads. Battles are those of
:mod:`leaderboard.stats.battles`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from leaderboard.stats.battles import (
    QUANTILES,
    EncodedBattles,
    empty_ratings,
    encode_battles,
    rating_frame,
)
from leaderboard.stats.bradley_terry import bradley_terry

if TYPE_CHECKING:
    import pandas as pd

# Below this many updates the work runs on the calling thread: starting threads would cost more.
_THREAD_MIN_UPDATES = 1 << 18


def _threads() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _rounds_in_threads(
    rounds: int, updates: int, group: int, play: Callable[[int, int], None]
) -> None:
    """Call ``play(first, stop)`` on contiguous ranges of whole groups of ``group`` rounds, one
    range per CPU in threads of their own (on the calling thread for little work).

    Python threads around a GIL-free kernel rather than numba's ``parallel=True``: Celery's
    prefork workers fork, and numba's workqueue threading layer is not fork-safe.
    """
    groups = -(-rounds // group)
    workers = 1 if updates < _THREAD_MIN_UPDATES else min(_threads(), groups)
    bounds = [min(rounds, group * (groups * w // workers)) for w in range(workers + 1)]
    if workers == 1:
        play(0, rounds)
        return
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda w: play(bounds[w], bounds[w + 1]), range(workers)))


def _kinds(
    enc: EncodedBattles,
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]
]:
    """Each battle's kind (model a, model b, outcome numbered densely in that order), and each
    kind's model a, model b and score of a."""
    m = len(enc.models)
    code = (enc.a * m + enc.b) * 3 + (2.0 * enc.score_a).astype(np.intp)
    # Codes lie below 3 m²: numbered by marking the ones present, without sorting the battles.
    present = np.bincount(code, minlength=3 * m * m) > 0
    kinds = np.flatnonzero(present)
    kind = (np.cumsum(present) - 1)[code]
    pair, outcome = np.divmod(kinds, 3)
    kind_a, kind_b = np.divmod(pair, m)
    return kind.astype(np.int64), kind_a, kind_b, outcome / 2.0


def _canonical_order(kind: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    # numpy's stable sort of 16-bit integers is a radix sort: linear in the battles.
    small = kind.astype(np.int16) if kind.size and kind.max() < 2**15 else kind
    return np.argsort(small, kind="stable")


def canonical_battle_order(
    battles: pd.DataFrame, clusters: npt.ArrayLike | None = None
) -> npt.NDArray[np.intp]:
    """Return the order in which :func:`elo_bootstrap` numbers the battles for its draws.

    The battles sorted by kind: model a, then model b (by name), then outcome (model_b, tie,
    model_a), keeping the given order within a kind; with ``clusters`` (one prompt id per
    battle), sorted by prompt id first. Draw ``i`` of
    :func:`elo_kernel.bootstrap_battle_indices` plays battle ``canonical_battle_order(battles)[i]``
    (a row position in ``battles``). Numbering by kind makes the ratings independent of the order
    the rows come in, and lets the compiled engine find a drawn battle's kind in small tables.
    """
    enc = encode_battles(battles)
    if not len(enc.a):
        return np.zeros(0, dtype=np.intp)
    kind = _kinds(enc)[0]
    if clusters is None:
        return _canonical_order(kind)
    return np.lexsort((kind, _cluster_codes(clusters, len(kind))[0]))


def _cluster_codes(clusters: npt.ArrayLike, n: int) -> tuple[npt.NDArray[np.intp], int]:
    """Each battle's prompt numbered in the order of the prompt ids, and how many prompts."""
    import pandas as pd

    ids = np.asarray(clusters)
    if ids.shape != (n,):
        raise ValueError("clusters must give one prompt id per battle")
    codes, uniques = pd.factorize(pd.Series(ids, copy=False), sort=True)
    if (codes < 0).any():
        raise ValueError("clusters must give every battle a prompt id (found a missing one)")
    return codes, len(uniques)


def _canonical(enc: EncodedBattles) -> EncodedBattles:
    """The battles in canonical order (:func:`canonical_battle_order`)."""
    kind = _kinds(enc)[0]
    if (kind[1:] >= kind[:-1]).all():
        return enc
    order = _canonical_order(kind)
    return EncodedBattles(
        models=enc.models, a=enc.a[order], b=enc.b[order], score_a=enc.score_a[order]
    )


def _play_rounds(
    kernel: Any,
    arguments: tuple[Any, ...],
    group: int,
    shape: tuple[int, int],
    n: int,
    k: float,
    scale: float,
    base: float,
    boards: int = 1,
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]]:
    """Run a compiled bootstrap kernel over all rounds (``shape`` is rounds x models), in
    threads (:func:`_rounds_in_threads`): for each of its ``boards``, the ratings relative to
    the initial one and which models played in each round."""
    coefficient = math.log(base) / scale
    qs = [np.ones(shape) for _ in range(boards)]
    played = [np.zeros(shape, dtype=bool) for _ in range(boards)]
    states = [state for q, p in zip(qs, played, strict=True) for state in (q.reshape(-1), p)]

    def play(first: int, stop: int) -> None:
        kernel(*states, *arguments, first, stop, k, coefficient)

    _rounds_in_threads(shape[0], n * shape[0] * boards, group, play)
    return [(np.log(q) / coefficient, p) for q, p in zip(qs, played, strict=True)]


def _elo_bootstrap_fused(
    enc: EncodedBattles,
    key: np.uint64,
    rounds: int,
    k: float,
    scale: float,
    base: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The battle bootstrap of :func:`elo_bootstrap` on battles in canonical order:
    :func:`elo_kernel._elo_draws_loop` over the rounds (:func:`_play_rounds`)."""
    from leaderboard.stats.elo_kernel import BUCKETS, GROUP, elo_draws_compiled

    m, n = len(enc.models), len(enc.a)
    kind, kind_a, kind_b, kind_score = _kinds(enc)
    if (kind[1:] < kind[:-1]).any():
        raise ValueError("the battle bootstrap needs the battles in canonical order")
    kind_end = np.cumsum(np.bincount(kind, minlength=kind_a.size))
    # Bucket b holds the draws u with b = u >> (64 - log2 B), whose positions floor(u n / 2**64)
    # start at floor(b n / B): the kind there is the least a draw in the bucket can have.
    starts = (np.arange(BUCKETS, dtype=np.int64) * n) // BUCKETS
    bucket_kind = kind[starts].astype(np.uint64)
    # The last word of each kind, exactly (Python integers): the last kind's is 2**64 - 1.
    kind_below = np.array(
        [-(-(int(end) << 64) // n) - 1 for end in kind_end.tolist()], dtype=np.uint64
    )
    arguments = (
        bucket_kind,
        kind_below,
        kind_a.astype(np.uint64),
        kind_b.astype(np.uint64),
        kind_score,
        n,
        key,
    )
    return _play_rounds(elo_draws_compiled, arguments, GROUP, (rounds, m), n, k, scale, base)[0]


def _kind_dtype(kinds: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest unsigned integer that numbers ``kinds`` kinds."""
    for dtype in (np.uint8, np.uint16):
        if kinds <= np.iinfo(dtype).max + 1:
            return dtype
    return np.uint32


def _elo_bootstrap_prompts(
    enc: EncodedBattles,
    clusters: npt.ArrayLike,
    key: np.uint64,
    rounds: int,
    k: float,
    scale: float,
    base: float,
    *,
    untied: bool = False,
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]]:
    """The prompt bootstrap of :func:`elo_bootstrap`: :func:`elo_kernel._elo_prompts_loop` over
    the rounds (:func:`_play_rounds`); with ``untied``, also the board without ties of the same
    rounds."""
    from leaderboard.stats.elo_kernel import PROMPT_GROUP, elo_prompts_compiled

    m, n = len(enc.models), len(enc.a)
    kind, kind_a, kind_b, kind_score = _kinds(enc)
    codes, prompts = _cluster_codes(clusters, n)
    # The kinds in (prompt, kind) order: battles of one prompt and kind are alike, so sorting
    # the numbers prompt * kinds + kind gives the kinds of the canonical order (a plain sort of
    # integers, several times faster than a two-key lexsort).
    kinds = np.int64(kind_a.size)
    ordered_kind = np.sort(codes.astype(np.int64) * kinds + kind) % kinds
    prompt_start = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=prompts))])
    narrow = _kind_dtype(kind_a.size)
    arguments = (
        ordered_kind.astype(narrow),
        prompt_start.astype(np.int64),
        kind_a.astype(np.uint64),
        kind_b.astype(np.uint64),
        kind_score,
        key,
    )
    shape = (rounds, m)
    no_q, no_played = np.zeros(0), np.zeros((0, m), dtype=bool)

    def one_board(q: Any, played: Any, *rest: Any) -> None:
        elo_prompts_compiled(q, played, no_q, no_played, *rest)

    kernel: Any = elo_prompts_compiled if untied else one_board
    boards = 2 if untied else 1
    return _play_rounds(kernel, arguments, PROMPT_GROUP, shape, n, k, scale, base, boards)


def elo_kernel_warm() -> None:
    """Load (or, the first time on a machine, compile) the Elo kernel now rather than in the
    first report: numba keeps the machine code on disk (``cache=True``), but loading it still
    costs a process about a second. The analysis worker calls this as each process starts."""
    import pandas as pd

    from leaderboard.stats.elo_kernel import elo_prompts_compiled

    warm = pd.DataFrame(
        {"model_a": ["a", "b"], "model_b": ["b", "a"], "winner": ["tie", "model_a"]}
    )
    elo_bootstrap(warm, rounds=2)
    elo_bootstrap(warm, rounds=2, clusters=[1, 2])
    bradley_terry(warm, rounds=2)
    # The prompt kernel has one machine code per width of the kind numbers (_kind_dtype): the
    # call above loaded the 8-bit one; a study of more than 9 models needs a wider one.
    kernel: Any = elo_prompts_compiled
    q, played = np.ones(2), np.zeros((1, 2), dtype=bool)
    a, b = np.zeros(1, dtype=np.uint64), np.ones(1, dtype=np.uint64)
    for dtype in (np.uint16, np.uint32):
        kinds, starts = np.zeros(1, dtype=dtype), np.array([0, 1], dtype=np.int64)
        kernel(
            q,
            played,
            q[:0],
            played[:0],
            kinds,
            starts,
            a,
            b,
            np.ones(1),
            np.uint64(0),
            0,
            1,
            4.0,
            0.01,
        )


def elo_bootstrap(
    battles: pd.DataFrame,
    *,
    rounds: int = 1000,
    k: float = 4.0,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
    seed: int = 0,
    clusters: npt.ArrayLike | None = None,
) -> pd.DataFrame:
    """Return bootstrapped online Elo ratings: median and 2.5th / 97.5th percentiles over rounds.

    Update rule per battle: ``E_a = 1 / (1 + base ** ((R_b - R_a) / scale))``,
    ``R_a += k (S_a - E_a)``, ``R_b -= k (S_a - E_a)`` with ``S_a`` 1, 0 or 1/2 (tie), all models
    starting at ``init``. Sources: A. Elo (1978), "The Rating of Chessplayers, Past and Present";
    the LMSYS Chatbot Arena Elo notebook (Zheng et al. 2023), as followed by the Hugging Face H4
    study "Can foundation models label data like humans?" (2023).

    Without ``clusters`` (the notebook's bootstrap), each round replays n battles drawn with
    replacement, in the order drawn (:func:`elo_kernel.bootstrap_battle_indices` gives the
    draws; the compiled kernel :func:`elo_kernel._elo_draws_loop` makes them on the fly). With
    ``clusters`` (one id per battle, for example its prompt), each round draws the C prompts with
    replacement, C times, takes all the battles of each prompt drawn (a prompt drawn twice gives
    its battles twice) and replays them in a uniformly random order (the cluster bootstrap: Efron
    & Tibshirani 1993, "An Introduction to the Bootstrap", section 8.5; battles on one prompt are
    not independent, so this is the uncertainty about new prompts);
    :func:`elo_kernel._elo_prompts_loop` gives the exact draws. Either way the battles are first
    numbered in canonical order (:func:`canonical_battle_order`), so the ratings do not depend on
    the order of the rows, and the same seed gives the same ratings. Rounds are spread over one
    thread per CPU.

    A model that does not appear in a round's sample has no rating in that round (as in the
    notebook) and the percentiles skip it. Returns columns model, rating (median), lower, upper,
    sorted by rating descending; no battles gives an empty frame.
    """
    from leaderboard.stats.elo_kernel import draw_key

    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    enc = encode_battles(battles)
    n = len(enc.a)
    if n == 0:
        return empty_ratings()
    if n >= 2**32:
        raise ValueError("the bootstrap draws need fewer than 2**32 battles")
    key = draw_key(seed)
    if clusters is None:
        relative, played = _elo_bootstrap_fused(_canonical(enc), key, rounds, k, scale, base)
    else:
        if rounds >= 2**24:
            raise ValueError("the prompt bootstrap runs fewer than 2**24 rounds")
        [(relative, played)] = _elo_bootstrap_prompts(enc, clusters, key, rounds, k, scale, base)
    return _board_frame(enc.models, relative, played, init)


def _board_frame(
    models: list[str],
    relative: npt.NDArray[np.float64],
    played: npt.NDArray[np.bool_],
    init: float,
) -> pd.DataFrame:
    """The median and percentiles over rounds of each model's rating, skipping the rounds in
    which it did not play."""
    ratings = np.where(played, relative + init, np.nan)
    lower, median, upper = np.nanquantile(ratings, QUANTILES, axis=0)
    return rating_frame(models, median, lower, upper)


def elo_bootstrap_ties_kept_and_dropped(
    battles: pd.DataFrame,
    *,
    clusters: npt.ArrayLike,
    rounds: int = 1000,
    k: float = 4.0,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The prompt bootstrap of :func:`elo_bootstrap` for two boards at once: ties as half a win,
    and ties left out, from the same resampled prompts.

    Each round draws the prompts and orders their battles as :func:`elo_bootstrap` with
    ``clusters`` does, plays that sequence for the first board, and the same sequence less its
    ties for the second: the second board is Elo without ties computed on the same resample of
    prompts (the cluster bootstrap of the pair of statistics, Efron & Tibshirani 1993, section
    8.5; a uniformly random order less some of its items is a uniformly random order of the
    rest). The first board equals ``elo_bootstrap(battles, clusters=clusters, ...)``. The
    second lists the models that have a battle other than a tie. Returns the two frames, each
    as :func:`elo_bootstrap` returns."""
    from leaderboard.stats.elo_kernel import draw_key

    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if rounds >= 2**24:
        raise ValueError("the prompt bootstrap runs fewer than 2**24 rounds")
    enc = encode_battles(battles)
    n = len(enc.a)
    if n == 0:
        return empty_ratings(), empty_ratings()
    if n >= 2**32:
        raise ValueError("the bootstrap draws need fewer than 2**32 battles")
    key = draw_key(seed)
    kept, dropped = _elo_bootstrap_prompts(enc, clusters, key, rounds, k, scale, base, untied=True)
    decisive = enc.score_a != 0.5
    present = np.zeros(len(enc.models), dtype=bool)
    present[enc.a[decisive]] = True
    present[enc.b[decisive]] = True
    untied_models = [m for m, p in zip(enc.models, present, strict=True) if p]
    # Only ties: no board without them, as elo_bootstrap gives for no battles.
    untied = (
        _board_frame(untied_models, dropped[0][:, present], dropped[1][:, present], init)
        if untied_models
        else empty_ratings()
    )
    return _board_frame(enc.models, *kept, init), untied
