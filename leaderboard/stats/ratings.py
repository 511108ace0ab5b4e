"""Model ratings from pairwise battles: online Elo with bootstrap, Bradley-Terry, win rates.

``battles`` is a DataFrame with columns ``model_a``, ``model_b`` and ``winner`` in {"model_a",
"model_b", "tie"}; a tie is half a win for each side. A battle of a model against itself carries
no information and is rejected (ValueError) rather than dropped silently.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt
import pandas as pd

RATING_COLUMNS = ["model", "rating", "lower", "upper"]
_SCORE_A = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}
# The first model's score in a battle, by winner (a tie is half a win).
SCORE_A = _SCORE_A
_QUANTILES = (0.025, 0.5, 0.975)


@dataclass(frozen=True)
class _Encoded:
    models: list[str]
    a: npt.NDArray[np.intp]
    b: npt.NDArray[np.intp]
    score_a: npt.NDArray[np.float64]


def _encode(battles: pd.DataFrame) -> _Encoded:
    missing = {"model_a", "model_b", "winner"} - set(battles.columns)
    if missing:
        raise ValueError(f"battles lack the columns {sorted(missing)}")
    # Factorised once, then the few distinct values are checked and mapped, so that a million
    # battles cost array passes rather than a dictionary lookup per battle.
    winner_codes, winner_values = pd.factorize(battles["winner"])
    unknown = set(winner_values.tolist()) - set(_SCORE_A)
    if (winner_codes < 0).any():
        unknown.add(None)
    if unknown:
        raise ValueError(
            f"winner must be model_a, model_b or tie; found {sorted(map(str, unknown))}"
        )
    # Factorised as they come (a Categorical by its codes), then the few distinct names are
    # turned into text; converting a million names to text first costs far more.
    codes_a, seen_a = pd.factorize(battles["model_a"])
    codes_b, seen_b = pd.factorize(battles["model_b"])
    if (codes_a < 0).any() or (codes_b < 0).any():
        raise ValueError("model_a and model_b must name a model in every battle")
    names_a = [str(m) for m in seen_a.tolist()]
    names_b = [str(m) for m in seen_b.tolist()]
    models = sorted(set(names_a) | set(names_b))
    # factorize numbers the names in order of appearance; map them to their sorted positions.
    position = {m: i for i, m in enumerate(models)}
    a = np.array([position[m] for m in names_a], dtype=np.intp)[codes_a]
    b = np.array([position[m] for m in names_b], dtype=np.intp)[codes_b]
    if (a == b).any():
        raise ValueError("a battle of a model against itself carries no information")
    scores = np.array([_SCORE_A[w] for w in winner_values.tolist()], dtype=np.float64)
    return _Encoded(
        models=models,
        a=a,
        b=b,
        score_a=scores[winner_codes],
    )


def _rating_frame(
    models: list[str],
    rating: npt.NDArray[np.float64],
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
) -> pd.DataFrame:
    frame = pd.DataFrame({"model": models, "rating": rating, "lower": lower, "upper": upper})
    frame = frame.sort_values(["rating", "model"], ascending=[False, True], kind="stable")
    return frame.reset_index(drop=True)[RATING_COLUMNS]


def _empty_ratings() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype=object if c == "model" else float) for c in RATING_COLUMNS}
    )


# Constants of SplitMix64: the golden-ratio increment and D. Stafford's "Mix13" finaliser.
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX13_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX13_2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)


def _draw_key(seed: int) -> np.uint64:
    """Return the 64-bit key of the bootstrap draws: numpy's ``SeedSequence(seed)`` hashed state."""
    key: np.uint64 = np.random.SeedSequence(seed).generate_state(1, np.uint64)[0]
    return key


def _draws(
    key: np.uint64, n: int, rounds: npt.NDArray[np.int64], positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Return the battle drawn at each of ``positions`` (rows) in each of ``rounds`` (columns).

    The numpy form of the protocol of :func:`bootstrap_battle_indices`, vectorised.
    """
    counter = rounds[None, :].astype(np.uint64) * np.uint64(n) + positions[:, None].astype(
        np.uint64
    )
    z = key + (counter + np.uint64(1)) * _GOLDEN_GAMMA  # uint64 arithmetic wraps modulo 2**64.
    z = (z ^ (z >> np.uint64(30))) * _MIX13_1
    z = (z ^ (z >> np.uint64(27))) * _MIX13_2
    z ^= z >> np.uint64(31)
    bound = np.uint64(n)
    high = ((z >> np.uint64(32)) * bound + (((z & _LOW32) * bound) >> np.uint64(32))) >> np.uint64(
        32
    )
    return high.astype(np.int64)


def bootstrap_battle_indices(n_battles: int, rounds: int, seed: int) -> npt.NDArray[np.int64]:
    """Return the (rounds, n_battles) battle indices that :func:`elo_bootstrap` draws.

    Protocol (counter-based, so that any round and position can be drawn on its own): the key
    ``K`` is ``numpy.random.SeedSequence(seed).generate_state(1, uint64)[0]``; the draw at
    position ``t`` of round ``r`` is word ``c = r * n_battles + t`` of the SplitMix64 sequence
    keyed by ``K``, ``u = mix13(K + (c + 1) * 0x9E3779B97F4A7C15 mod 2**64)``, mapped to a battle
    by the multiply-high ``floor(u * n_battles / 2**64)`` (computed exactly, for
    ``n_battles < 2**32``). Each round is thus a sample of the battles with replacement in a new
    order. Sources: G. Steele, D. Lea & C. Flood (2014), "Fast splittable pseudorandom number
    generators", OOPSLA (SplitMix64); D. Stafford (2011), "Better bit mixing" (Mix13); D. Lemire
    (2019), "Fast random integer generation in an interval", ACM TOMACS 29(1) (multiply-high).
    Without Lemire's rejection step a battle's probability is ``floor(2**64 / n)`` or
    ``ceil(2**64 / n)`` over ``2**64``, off 1/n by less than ``n / 2**64`` relative (5e-14 for a
    million battles): far below any bootstrap noise. The indices number the battles in
    :func:`canonical_battle_order`. Provided so that a reference implementation can replay
    exactly the same rounds.
    """
    if not 0 < n_battles < 2**32:
        raise ValueError("the bootstrap draws need between 1 and 2**32 - 1 battles")
    key = _draw_key(seed)
    return _draws(key, n_battles, np.arange(rounds), np.arange(n_battles)).T.copy()


# Rounds played side by side by one thread: their Elo chains are independent, so the CPU overlaps
# them.
_GROUP = 16
# Battle positions whose draws are made, and looked up by kind, ahead of being played.
_CHUNK = 256
# Buckets of battle positions in the table that finds a drawn position's kind: a power of two,
# so that a draw's bucket is the top bits of its random word.
_BUCKETS = 4096
_BUCKET_SHIFT = np.uint64(64 - 12)
# Below this many updates the work runs on the calling thread: starting threads would cost more.
_THREAD_MIN_UPDATES = 1 << 18


def _mix13(z: np.uint64) -> np.uint64:
    """Stafford's Mix13, the SplitMix64 output function. Compiled by numba; called only compiled."""
    z = (z ^ (z >> np.uint64(30))) * _MIX13_1
    z = (z ^ (z >> np.uint64(27))) * _MIX13_2
    return z ^ (z >> np.uint64(31))


def _exp_pair(x: float, short: bool, series: bool) -> tuple[float, float]:
    """``(exp(x), exp(-x))`` for the step ``x`` of an Elo update in strengths: by the Taylor
    series to the 7th power (``short``), to the 13th (``series``), else by ``exp`` (see
    :func:`_elo_draws_loop` for the error bounds). Compiled by numba; called only compiled."""
    if short:
        x2 = x * x
        even = 1.0 + x2 * (_E2 + x2 * (_E4 + x2 * _E6))
        odd = x * (1.0 + x2 * (_E3 + x2 * (_E5 + x2 * _E7)))
        return even + odd, even - odd
    if series:
        x2 = x * x
        even = 1.0 + x2 * (_E2 + x2 * (_E4 + x2 * (_E6 + x2 * (_E8 + x2 * (_E10 + x2 * _E12)))))
        odd = x * (1.0 + x2 * (_E3 + x2 * (_E5 + x2 * (_E7 + x2 * (_E9 + x2 * _E11)))))
        return even + odd, even - odd
    up = math.exp(x)
    return up, 1.0 / up


def _play(
    q: npt.NDArray[np.float64],
    row: np.uint64,
    kind: np.uint64,
    kind_a: npt.NDArray[np.uint64],
    kind_b: npt.NDArray[np.uint64],
    kind_score: npt.NDArray[np.float64],
    step: float,
    short: bool,
    series: bool,
) -> None:
    """One Elo update in strengths: the battle of kind ``kind`` in the round whose strengths
    start at ``q[row]`` (see :func:`_elo_draws_loop`). Compiled by numba; called only compiled."""
    at_a = row + kind_a[kind]
    at_b = row + kind_b[kind]
    qa = q[at_a]
    qb = q[at_b]
    up, down = _exp_pair_compiled(step * (kind_score[kind] - qa / (qa + qb)), short, series)
    q[at_a] = qa * up
    q[at_b] = qb * down


def _mark_played(
    played: npt.NDArray[np.bool_],
    seen: npt.NDArray[np.bool_],
    group: int,
    width: int,
    kind_a: npt.NDArray[np.uint64],
    kind_b: npt.NDArray[np.uint64],
    counts: npt.NDArray[np.bool_],
) -> None:
    """Mark the models of the kinds seen in rounds ``group`` to ``group + width - 1`` as
    played, of the kinds that ``counts`` marks. Compiled by numba; called only compiled."""
    for j in range(width):
        for kind in range(kind_a.size):
            if seen[j, kind] and counts[kind]:
                played[group + j, kind_a[kind]] = True
                played[group + j, kind_b[kind]] = True


def _elo_draws_loop(
    q: npt.NDArray[np.float64],
    played: npt.NDArray[np.bool_],
    bucket_kind: npt.NDArray[np.uint64],
    kind_below: npt.NDArray[np.uint64],
    kind_a: npt.NDArray[np.uint64],
    kind_b: npt.NDArray[np.uint64],
    kind_score: npt.NDArray[np.float64],
    n: int,
    key: np.uint64,
    first: int,
    stop: int,
    k: float,
    log_base_over_scale: float,
) -> None:
    """Play rounds ``first`` to ``stop - 1`` of the bootstrap into ``q`` (the rounds x models
    strengths, flattened) and ``played``, in place.

    The battles are in canonical order (:func:`canonical_battle_order`), so that battles of one
    kind (models and outcome) are contiguous: kind ``c`` holds positions ``e[c - 1]`` to
    ``e[c] - 1``. Each draw is made on the fly by the protocol of
    :func:`bootstrap_battle_indices` (the SplitMix64 state of a round advancing by the golden
    gamma from one position to the next). Its position ``floor(u n / 2**64)`` is at or past
    ``e[c]`` exactly when the random word ``u`` is at or past ``ceil(e[c] 2**64 / n)``, so the
    kind is found from the word alone, without computing the position: a table of ``B`` buckets
    of the word (``bucket_kind[b]``: the kind of the bucket's least word) gives a first kind,
    then a step past each kind whose last word, ``kind_below[c] = ceil(e[c] 2**64 / n) - 1``, is
    below ``u``. These are reads of small tables that stay in cache. Which models played in a
    round is known from the kinds drawn, marked as they are drawn. Indices are unsigned, so the
    compiled code checks none for being negative.

    Ratings are kept as strengths ``q = exp(R ln(base) / scale)``: the expected score of A is
    then ``q_a / (q_a + q_b)`` and the update ``R += d`` is ``q *= exp(d ln(base) / scale)``, an
    exponential of a small number ``x`` (at most ``s = k ln(base) / scale`` in size: 0.023 for
    the defaults), computed by its Taylor series: to the 7th power when ``s`` is below 0.03
    (the first term left out, ``x**8 / 8!``, is under 2e-17), to the 13th when ``s`` is below
    1/4 (under 5e-20), by ``exp`` otherwise; relative errors below the 1.1e-16 of a float's
    rounding. Rounds run in groups of ``_GROUP``, whose chains are independent; the draws of
    ``_CHUNK`` positions are made first, then played. Releases the GIL, so threads may run
    disjoint round ranges. Compiled by numba; called only compiled.
    """
    models = np.uint64(played.shape[1])
    bound = np.uint64(n)
    step = k * log_base_over_scale
    short = abs(step) < 0.03
    series = abs(step) < 0.25
    kinds = kind_a.size
    drawn = np.zeros((_CHUNK, _GROUP), dtype=np.uint32)
    state = np.zeros(_GROUP, dtype=np.uint64)
    seen = np.zeros((_GROUP, kinds), dtype=np.bool_)
    every = np.ones(kinds, dtype=np.bool_)
    for group in range(first, stop, _GROUP):
        width = min(_GROUP, stop - group)
        seen[:] = False
        for chunk in range(0, n, _CHUNK):
            length = min(_CHUNK, n - chunk)
            for j in range(width):
                counter = np.uint64(group + j) * bound + np.uint64(chunk)
                state[j] = key + (counter + np.uint64(1)) * _GOLDEN_GAMMA
            for t in range(length):
                for j in range(width):
                    u = _mix13_compiled(state[j])
                    state[j] += _GOLDEN_GAMMA
                    kind = bucket_kind[u >> _BUCKET_SHIFT]
                    while u > kind_below[kind]:
                        kind += np.uint64(1)
                    drawn[t, j] = kind
                    seen[j, kind] = True
            for t in range(length):
                for j in range(width):
                    _play_compiled(
                        q,
                        np.uint64(group + j) * models,
                        np.uint64(drawn[t, j]),
                        kind_a,
                        kind_b,
                        kind_score,
                        step,
                        short,
                        series,
                    )
        _mark_played_compiled(played, seen, group, width, kind_a, kind_b, every)


# Rounds of the prompt bootstrap played side by side by one thread (each holds its own sequence of
# battles, so fewer than the battle bootstrap's).
_PROMPT_GROUP = 4
# A round of the prompt bootstrap takes its random words from a stretch of this many counters.
_ROUND_WORDS = np.uint64(1 << 40)
_SHIFT32 = np.uint64(32)


def _below(u: np.uint64, bound: np.uint64) -> np.uint64:
    """``floor(u * bound / 2**64)`` exactly, for ``bound < 2**32`` (Lemire's multiply-high).
    Compiled by numba; called only compiled."""
    return ((u >> _SHIFT32) * bound + (((u & _LOW32) * bound) >> _SHIFT32)) >> _SHIFT32


def _elo_prompts_loop(
    q: npt.NDArray[np.float64],
    played: npt.NDArray[np.bool_],
    q_untied: npt.NDArray[np.float64],
    played_untied: npt.NDArray[np.bool_],
    battle_kind: npt.NDArray[np.unsignedinteger[Any]],
    prompt_start: npt.NDArray[np.int64],
    kind_a: npt.NDArray[np.uint64],
    kind_b: npt.NDArray[np.uint64],
    kind_score: npt.NDArray[np.float64],
    key: np.uint64,
    first: int,
    stop: int,
    k: float,
    log_base_over_scale: float,
) -> None:
    """Play rounds ``first`` to ``stop - 1`` of the prompt bootstrap into ``q`` (the rounds x
    models strengths, flattened) and ``played``, in place.

    The battles are numbered by prompt, then kind (:func:`canonical_battle_order` with
    clusters): prompt ``p`` holds positions ``prompt_start[p]`` to ``prompt_start[p + 1] - 1``,
    and ``battle_kind`` gives each position's kind. Round ``r`` reads the random words
    ``u_i = mix13(K + (r 2**40 + i + 1) * 0x9E3779B97F4A7C15 mod 2**64)``, ``i = 0, 1, ...``:
    words ``0`` to ``C - 1`` draw the ``C`` prompts with replacement (prompt
    ``floor(u_i C / 2**64)``); the drawn prompts' battles, listed prompt after prompt, are put
    in a random order by the "inside-out" Fisher-Yates shuffle (Durstenfeld 1964; Knuth, TAOCP
    vol. 2, 3.4.2, algorithm P), battle ``t`` of the list taking word ``C + t`` and going to
    position ``j = floor(u (t + 1) / 2**64)`` (the one there moving to ``t``); the round then
    plays that sequence with the update of :func:`_elo_draws_loop`. With ``q_untied`` and
    ``played_untied`` of ``q``'s size (else empty), the round also plays the same sequence less
    its ties into them: the board without ties of the same resampled prompts. ``_PROMPT_GROUP``
    rounds are played side by side. The kinds (``battle_kind`` and the sequences) are numbers of
    the narrowest unsigned type that holds them (:func:`_kind_dtype`: 8 bits for up to 256
    kinds, which is up to 9 models), so that the sequence the shuffle writes at random places
    stays in a core's own cache (1 MB per million battles rather than 4). Releases the GIL.
    Compiled by numba; called only compiled.
    """
    models = np.uint64(played.shape[1])
    prompts = prompt_start.size - 1
    bound = np.uint64(prompts)
    step = k * log_base_over_scale
    short = abs(step) < 0.03
    series = abs(step) < 0.25
    kinds = kind_a.size
    untied = q_untied.size > 0
    every = np.ones(kinds, dtype=np.bool_)
    decisive = kind_score != 0.5
    sequence = np.empty((_PROMPT_GROUP, battle_kind.size), dtype=battle_kind.dtype)
    length = np.zeros(_PROMPT_GROUP, dtype=np.int64)
    drawn = np.empty(prompts, dtype=np.int64)
    seen = np.zeros((_PROMPT_GROUP, kinds), dtype=np.bool_)
    for group in range(first, stop, _PROMPT_GROUP):
        width = min(_PROMPT_GROUP, stop - group)
        seen[:] = False
        for j in range(width):
            state = key + (np.uint64(group + j) * _ROUND_WORDS + np.uint64(1)) * _GOLDEN_GAMMA
            total = 0
            for c in range(prompts):
                p = np.int64(_below_compiled(_mix13_compiled(state), bound))
                state += _GOLDEN_GAMMA
                drawn[c] = p
                total += prompt_start[p + 1] - prompt_start[p]
            if total >= 2**32:
                raise ValueError("a bootstrap round needs fewer than 2**32 battles")
            if total > sequence.shape[1]:
                # A round drew more battles than there are: room for them, keeping the group's
                # sequences drawn so far.
                larger = np.empty(
                    (_PROMPT_GROUP, max(total, 2 * sequence.shape[1])), dtype=battle_kind.dtype
                )
                for i in range(j):
                    larger[i, : length[i]] = sequence[i, : length[i]]
                sequence = larger
            t = 0
            for c in range(prompts):
                p = drawn[c]
                for i in range(prompt_start[p], prompt_start[p + 1]):
                    kind = battle_kind[i]
                    at = _below_compiled(_mix13_compiled(state), np.uint64(t + 1))
                    state += _GOLDEN_GAMMA
                    sequence[j, t] = sequence[j, at]
                    sequence[j, at] = kind
                    seen[j, kind] = True
                    t += 1
            length[j] = total
        for t in range(length[:width].max()):
            for j in range(width):
                if t >= length[j]:
                    continue
                row = np.uint64(group + j) * models
                kind = np.uint64(sequence[j, t])
                _play_compiled(q, row, kind, kind_a, kind_b, kind_score, step, short, series)
                if untied and decisive[kind]:
                    _play_compiled(
                        q_untied, row, kind, kind_a, kind_b, kind_score, step, short, series
                    )
        _mark_played_compiled(played, seen, group, width, kind_a, kind_b, every)
        if untied:
            _mark_played_compiled(played_untied, seen, group, width, kind_a, kind_b, decisive)


# 1/i! for the Taylor series of exp in _elo_draws_loop.
_E2, _E3, _E4, _E5, _E6, _E7 = (1.0 / math.factorial(i) for i in range(2, 8))
_E8, _E9, _E10, _E11, _E12 = (1.0 / math.factorial(i) for i in range(8, 13))


_mix13_compiled = numba.njit(cache=True)(_mix13)
_exp_pair_compiled = numba.njit(cache=True, inline="always")(_exp_pair)
_play_compiled = numba.njit(cache=True, inline="always")(_play)
_mark_played_compiled = numba.njit(cache=True)(_mark_played)
_elo_draws_compiled = numba.njit(nogil=True, cache=True)(_elo_draws_loop)
_below_compiled = numba.njit(cache=True)(_below)
_elo_prompts_compiled = numba.njit(nogil=True, cache=True)(_elo_prompts_loop)


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
    enc: _Encoded,
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
    battle), sorted by prompt id first. Draw ``i`` of :func:`bootstrap_battle_indices` plays
    battle ``canonical_battle_order(battles)[i]`` (a row position in ``battles``). Numbering by
    kind makes the ratings independent of the order the rows come in, and lets the compiled
    engine find a drawn battle's kind in small tables.
    """
    enc = _encode(battles)
    if not len(enc.a):
        return np.zeros(0, dtype=np.intp)
    kind = _kinds(enc)[0]
    if clusters is None:
        return _canonical_order(kind)
    return np.lexsort((kind, _cluster_codes(clusters, len(kind))[0]))


def _cluster_codes(clusters: npt.ArrayLike, n: int) -> tuple[npt.NDArray[np.intp], int]:
    """Each battle's prompt numbered in the order of the prompt ids, and how many prompts."""
    ids = np.asarray(clusters)
    if ids.shape != (n,):
        raise ValueError("clusters must give one prompt id per battle")
    codes, uniques = pd.factorize(pd.Series(ids, copy=False), sort=True)
    if (codes < 0).any():
        raise ValueError("clusters must give every battle a prompt id (found a missing one)")
    return codes, len(uniques)


def _canonical(enc: _Encoded) -> _Encoded:
    """The battles in canonical order (:func:`canonical_battle_order`)."""
    kind = _kinds(enc)[0]
    if (kind[1:] >= kind[:-1]).all():
        return enc
    order = _canonical_order(kind)
    return _Encoded(models=enc.models, a=enc.a[order], b=enc.b[order], score_a=enc.score_a[order])


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
    enc: _Encoded,
    key: np.uint64,
    rounds: int,
    k: float,
    scale: float,
    base: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The battle bootstrap of :func:`elo_bootstrap` on battles in canonical order:
    :func:`_elo_draws_loop` over the rounds (:func:`_play_rounds`)."""
    m, n = len(enc.models), len(enc.a)
    kind, kind_a, kind_b, kind_score = _kinds(enc)
    if (kind[1:] < kind[:-1]).any():
        raise ValueError("the battle bootstrap needs the battles in canonical order")
    kind_end = np.cumsum(np.bincount(kind, minlength=kind_a.size))
    # Bucket b holds the draws u with b = u >> (64 - log2 B), whose positions floor(u n / 2**64)
    # start at floor(b n / B): the kind there is the least a draw in the bucket can have.
    starts = (np.arange(_BUCKETS, dtype=np.int64) * n) // _BUCKETS
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
    return _play_rounds(_elo_draws_compiled, arguments, _GROUP, (rounds, m), n, k, scale, base)[0]


def _kind_dtype(kinds: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest unsigned integer that numbers ``kinds`` kinds."""
    for dtype in (np.uint8, np.uint16):
        if kinds <= np.iinfo(dtype).max + 1:
            return dtype
    return np.uint32


def _elo_bootstrap_prompts(
    enc: _Encoded,
    clusters: npt.ArrayLike,
    key: np.uint64,
    rounds: int,
    k: float,
    scale: float,
    base: float,
    *,
    untied: bool = False,
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]]:
    """The prompt bootstrap of :func:`elo_bootstrap`: :func:`_elo_prompts_loop` over the rounds
    (:func:`_play_rounds`); with ``untied``, also the board without ties of the same rounds."""
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
        _elo_prompts_compiled(q, played, no_q, no_played, *rest)

    kernel: Any = _elo_prompts_compiled if untied else one_board
    boards = 2 if untied else 1
    return _play_rounds(kernel, arguments, _PROMPT_GROUP, shape, n, k, scale, base, boards)


def elo_kernel_warm() -> None:
    """Load (or, the first time on a machine, compile) the Elo kernel now rather than in the
    first report: numba keeps the machine code on disk (``cache=True``), but loading it still
    costs a process about a second. The analysis worker calls this as each process starts."""
    warm = pd.DataFrame(
        {"model_a": ["a", "b"], "model_b": ["b", "a"], "winner": ["tie", "model_a"]}
    )
    elo_bootstrap(warm, rounds=2)
    elo_bootstrap(warm, rounds=2, clusters=[1, 2])
    bradley_terry(warm, rounds=2)
    # The prompt kernel has one machine code per width of the kind numbers (_kind_dtype): the
    # call above loaded the 8-bit one; a study of more than 9 models needs a wider one.
    kernel: Any = _elo_prompts_compiled
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
    replacement, in the order drawn (:func:`bootstrap_battle_indices` gives the draws; the
    compiled kernel :func:`_elo_draws_loop` makes them on the fly). With ``clusters`` (one id
    per battle, for example its prompt), each round draws the C prompts with replacement, C
    times, takes all the battles of each prompt drawn (a prompt drawn twice gives its battles
    twice) and replays them in a uniformly random order (the cluster bootstrap: Efron &
    Tibshirani 1993, "An Introduction to the Bootstrap", section 8.5; battles on one prompt are
    not independent, so this is the uncertainty about new prompts); :func:`_elo_prompts_loop`
    gives the exact draws. Either way the battles are first numbered in canonical order
    (:func:`canonical_battle_order`), so the ratings do not depend on the order of the rows,
    and the same seed gives the same ratings. Rounds are spread over one thread per CPU.

    A model that does not appear in a round's sample has no rating in that round (as in the
    notebook) and the percentiles skip it. Returns columns model, rating (median), lower, upper,
    sorted by rating descending; no battles gives an empty frame.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    enc = _encode(battles)
    n = len(enc.a)
    if n == 0:
        return _empty_ratings()
    if n >= 2**32:
        raise ValueError("the bootstrap draws need fewer than 2**32 battles")
    key = _draw_key(seed)
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
    lower, median, upper = np.nanquantile(ratings, _QUANTILES, axis=0)
    return _rating_frame(models, median, lower, upper)


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
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if rounds >= 2**24:
        raise ValueError("the prompt bootstrap runs fewer than 2**24 rounds")
    enc = _encode(battles)
    n = len(enc.a)
    if n == 0:
        return _empty_ratings(), _empty_ratings()
    if n >= 2**32:
        raise ValueError("the bootstrap draws need fewer than 2**32 battles")
    key = _draw_key(seed)
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
        else _empty_ratings()
    )
    return _board_frame(enc.models, *kept, init), untied


def _cells(
    enc: _Encoded, ties: Literal["half", "drop"]
) -> tuple[
    npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.int64]
]:
    """Deduplicate battles into (a, b, score) cells with their counts."""
    keep = np.ones(len(enc.a), dtype=bool) if ties == "half" else enc.score_a != 0.5
    a, b, s = enc.a[keep], enc.b[keep], enc.score_a[keep]
    m = len(enc.models)
    cell = (a * m + b) * 3 + (2.0 * s).astype(np.intp)
    unique, counts = np.unique(cell, return_counts=True)
    pair, outcome = np.divmod(unique, 3)
    ca, cb = np.divmod(pair, m)
    return ca, cb, outcome / 2.0, counts.astype(np.int64)


def _cluster_cells(
    enc: _Encoded, ties: Literal["half", "drop"], clusters: npt.NDArray[Any], n_cells: int
) -> Callable[[np.random.Generator, int], npt.NDArray[np.float64]]:
    """For the cluster bootstrap: a function drawing each round's weight of each (a, b, score)
    cell of :func:`_cells`: the cells' battle counts per cluster (a clusters x cells matrix)
    times the counts of the clusters drawn with replacement."""
    if len(clusters) != len(enc.a):
        raise ValueError("clusters must give one id per battle")
    keep = np.ones(len(enc.a), dtype=bool) if ties == "half" else enc.score_a != 0.5
    m = len(enc.models)
    cell = (enc.a[keep] * m + enc.b[keep]) * 3 + (2.0 * enc.score_a[keep]).astype(np.intp)
    _, cell_index = np.unique(cell, return_inverse=True)
    cluster_index, cluster_ids = pd.factorize(pd.Series(clusters[keep]), sort=True)
    n_clusters = len(cluster_ids)
    # Battles of each cell in each cluster: clusters x cells (the cells are few).
    per_cluster = (
        np.bincount(cluster_index * n_cells + cell_index, minlength=n_clusters * n_cells)
        .reshape(n_clusters, n_cells)
        .astype(np.float64)
    )

    def draw(rng: np.random.Generator, rounds: int) -> npt.NDArray[np.float64]:
        weights = np.empty((rounds, n_cells))
        step = max(1, 5_000_000 // max(n_clusters, 1))
        for start in range(0, rounds, step):
            size = min(step, rounds - start)
            # Each round picks n_clusters clusters uniformly with replacement, counted round by
            # round (a count that stays in cache).
            picks = rng.integers(0, n_clusters, size=(size, n_clusters))
            counts = np.empty((size, n_clusters))
            for row in range(size):
                counts[row] = np.bincount(picks[row], minlength=n_clusters)
            weights[start : start + size] = counts @ per_cluster
        return weights

    return draw


def _win_matrix(
    ca: npt.NDArray[np.intp],
    cb: npt.NDArray[np.intp],
    cs: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    m: int,
) -> npt.NDArray[np.float64]:
    """W[i, j] = wins of i over j, a tie counting half a win to each side."""
    wins = np.zeros(m * m)
    np.add.at(wins, ca * m + cb, weight * cs)
    np.add.at(wins, cb * m + ca, weight * (1.0 - cs))
    return wins.reshape(m, m)


def _fit_bt(wins: npt.NDArray[np.float64], ridge: float) -> npt.NDArray[np.float64]:
    """Maximise sum W_ij log sigmoid(t_i - t_j) - ridge/2 |t|² by damped Newton steps."""
    m = wins.shape[0]
    games = wins + wins.T
    theta = np.zeros(m)

    def objective(t: npt.NDArray[np.float64]) -> float:
        diff = t[:, None] - t[None, :]
        return float((wins * np.logaddexp(0.0, -diff)).sum() + 0.5 * ridge * (t @ t))

    current = objective(theta)
    for _ in range(200):
        prob = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        grad = -(wins - games * prob).sum(axis=1) + ridge * theta
        curvature = games * prob * prob.T
        hess = np.diag(curvature.sum(axis=1) + ridge) - curvature
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while True:
            candidate = theta - size * step
            value = objective(candidate)
            if value <= current or size < 1e-10:
                break
            size /= 2.0
        theta, previous, current = candidate, current, value
        if np.abs(size * step).max() < 1e-10 or previous - current < 1e-14 * max(1.0, current):
            break
    return theta


def win_matrix_strengths(
    ca: npt.NDArray[np.intp],
    cb: npt.NDArray[np.intp],
    score: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    m: int,
    ridge: float = 1e-4,
) -> npt.NDArray[np.float64]:
    """Return the Bradley-Terry strengths (natural scale, mean 0) of weighted battle cells: cell
    k is model ``ca[k]`` against ``cb[k]`` with the first's score ``score[k]`` (1, 0.5, 0) and
    weight ``weight[k]``, fitted as :func:`bradley_terry` fits its win matrix."""
    return _fit_bt(_win_matrix(ca, cb, score, weight, m), ridge)


def bradley_terry(
    battles: pd.DataFrame,
    *,
    ties: Literal["half", "drop"] = "half",
    rounds: int = 0,
    seed: int = 0,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
    anchor: str | None = None,
    ridge: float = 1e-4,
    clusters: npt.ArrayLike | None = None,
) -> pd.DataFrame:
    """Return Bradley-Terry ratings on the Elo scale, with bootstrap percentiles when rounds > 0.

    Model: ``P(i beats j) = 1 / (1 + base ** ((R_j - R_i) / scale))``, i.e. strengths
    ``t_i = R_i ln(base) / scale`` in ``P = sigmoid(t_i - t_j)``. The battles are first counted
    into a win matrix ``W`` (``ties="half"``: a tie is half a win each; ``"drop"``: ties are
    removed), then ``sum_ij W_ij log sigmoid(t_i - t_j) - ridge/2 sum_i t_i²`` is maximised by
    Newton's method. Sources: R. A. Bradley & M. E. Terry (1952), "Rank analysis of incomplete
    block designs", Biometrika 39:324-345; D. R. Hunter (2004), "MM algorithms for generalized
    Bradley-Terry models", Ann. Statist. 32:384-406; the LMSYS Chatbot Arena notebook.

    The ridge term is a N(0, 1/ridge) prior on the strengths: it makes the optimum unique and
    finite when a model never loses (the plain MLE diverges to infinity) or when the comparison
    graph is disconnected, and moves well-determined ratings by a negligible amount.

    Anchor: the ridge optimum has strengths of mean 0, so the mean rating is ``init`` (1000); with
    ``anchor`` naming a model, ratings are shifted so that model is rated ``init``.

    ``rating`` is the fit on all battles. With ``rounds > 0``, ``lower`` and ``upper`` are the
    2.5th / 97.5th percentiles over bootstrap refits. Each round reweights the n battles by
    multinomial counts, drawn per deduplicated outcome cell (same pair, same outcome) as
    ``rng.multinomial(n, cell_counts / n)`` with ``rng = default_rng(seed)``: the same
    distribution as multinomial(n, 1/n) weights per battle, summed within each cell. A model
    absent from a round's sample is skipped for that round. With ``clusters`` (one id per battle,
    for example its prompt), a round draws the C clusters instead, C times uniformly with
    replacement, each battle weighted by how often its cluster was drawn (the cluster, or block,
    bootstrap: Efron & Tibshirani 1993, "An Introduction to the Bootstrap", section 8.5;
    battles on one prompt are not independent). With ``rounds=0``, lower and upper
    are NaN (no interval is computed). Models left without battles (``ties="drop"`` removing
    all their battles) are not listed.
    Columns model, rating, lower, upper, sorted by rating descending.
    """
    if ties not in ("half", "drop"):
        raise ValueError("ties must be 'half' or 'drop'")
    if rounds < 0:
        raise ValueError("rounds must be non-negative")
    if ridge <= 0:
        raise ValueError("ridge must be positive so that the ratings stay finite")
    enc = _encode(battles)
    ca, cb, cs, counts = _cells(enc, ties)
    if counts.size == 0:
        return _empty_ratings()
    cluster_draw = None
    if clusters is not None:
        cluster_draw = _cluster_cells(enc, ties, np.asarray(clusters), len(counts))
    used = np.unique(np.concatenate([ca, cb]))
    remap = np.full(len(enc.models), -1, dtype=np.intp)
    remap[used] = np.arange(used.size)
    ca, cb = remap[ca], remap[cb]
    models = [enc.models[i] for i in used]
    m = len(models)
    if anchor is not None and anchor not in models:
        raise ValueError(f"anchor model {anchor!r} has no battles")
    to_rating = scale / math.log(base)

    def ratings_for(weight: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        wins = _win_matrix(ca, cb, cs, weight, m)
        theta = _fit_bt(wins, ridge) * to_rating
        if anchor is not None:
            theta = theta - theta[models.index(anchor)]
        result: npt.NDArray[np.float64] = theta + init
        return result

    point = ratings_for(counts.astype(np.float64))
    lower = np.full(m, np.nan)
    upper = np.full(m, np.nan)
    if rounds > 0:
        n = int(counts.sum())
        rng = np.random.default_rng(seed)
        if cluster_draw is None:
            draws = rng.multinomial(n, counts / n, size=rounds).astype(np.float64)
        else:
            draws = cluster_draw(rng, rounds)
        boot = np.empty((rounds, m))
        for r in range(rounds):
            boot[r] = ratings_for(draws[r])
            games = np.zeros(m)
            np.add.at(games, ca, draws[r])
            np.add.at(games, cb, draws[r])
            boot[r, games == 0] = np.nan
        lower, upper = np.nanquantile(boot, [_QUANTILES[0], _QUANTILES[2]], axis=0)
    return _rating_frame(models, point, lower, upper)
