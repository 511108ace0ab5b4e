"""The compiled engine of the Elo bootstrap: its counter-based draws and the numba kernels that
play the rounds (:func:`elo.elo_bootstrap` prepares their tables and threads).

Draws: the word ``c`` of a seed's stream is ``mix13(K + (c + 1) * 0x9E3779B97F4A7C15 mod 2**64)``
with ``K`` the seed's ``numpy.random.SeedSequence`` state (SplitMix64: G. Steele, D. Lea & C.
Flood (2014), "Fast splittable pseudorandom number generators", OOPSLA; Mix13: D. Stafford
(2011), "Better bit mixing"), mapped below a bound ``n`` by the exact multiply-high
``floor(u n / 2**64)`` (D. Lemire (2019), "Fast random integer generation in an interval", ACM
TOMACS 29(1)). :func:`bootstrap_battle_indices` states the battle draws in numpy,
:func:`_elo_prompts_loop` the prompt draws and their shuffle (Fisher-Yates, "inside-out").

Update: online Elo (A. Elo (1978), "The Rating of Chessplayers, Past and Present"; the LMSYS
Chatbot Arena notebook, Zheng et al. 2023) kept in strengths ``q = base ** (R / scale)``
(:func:`_elo_draws_loop` gives the algebra and the error bounds of its exponential).

Everything numba compiles lives in this one file, constants included: numba's on-disk cache
(``cache=True``) is invalidated by the source file of the function it compiled, not by the files
of what that function calls, so a kernel and its helpers must change together.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

# Constants of SplitMix64: the golden-ratio increment and D. Stafford's "Mix13" finaliser.
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX13_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX13_2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)


def draw_key(seed: int) -> np.uint64:
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
    """Return the (rounds, n_battles) battle indices that :func:`elo.elo_bootstrap` draws.

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
    :func:`elo.canonical_battle_order`. Provided so that a reference implementation can replay
    exactly the same rounds.
    """
    if not 0 < n_battles < 2**32:
        raise ValueError("the bootstrap draws need between 1 and 2**32 - 1 battles")
    key = draw_key(seed)
    return _draws(key, n_battles, np.arange(rounds), np.arange(n_battles)).T.copy()


# Rounds played side by side by one thread: their Elo chains are independent, so the CPU overlaps
# them.
GROUP = 16
# Battle positions whose draws are made, and looked up by kind, ahead of being played.
_CHUNK = 256
# Buckets of battle positions in the table that finds a drawn position's kind: a power of two,
# so that a draw's bucket is the top bits of its random word.
BUCKETS = 4096
_BUCKET_SHIFT = np.uint64(64 - 12)


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

    The battles are in canonical order (:func:`elo.canonical_battle_order`), so that battles of one
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
    rounding. Rounds run in groups of ``GROUP``, whose chains are independent; the draws of
    ``_CHUNK`` positions are made first, then played. Releases the GIL, so threads may run
    disjoint round ranges. Compiled by numba; called only compiled.
    """
    models = np.uint64(played.shape[1])
    bound = np.uint64(n)
    step = k * log_base_over_scale
    short = abs(step) < 0.03
    series = abs(step) < 0.25
    kinds = kind_a.size
    drawn = np.zeros((_CHUNK, GROUP), dtype=np.uint32)
    state = np.zeros(GROUP, dtype=np.uint64)
    seen = np.zeros((GROUP, kinds), dtype=np.bool_)
    every = np.ones(kinds, dtype=np.bool_)
    for group in range(first, stop, GROUP):
        width = min(GROUP, stop - group)
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
PROMPT_GROUP = 4
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

    The battles are numbered by prompt, then kind (:func:`elo.canonical_battle_order` with
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
    its ties into them: the board without ties of the same resampled prompts. ``PROMPT_GROUP``
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
    sequence = np.empty((PROMPT_GROUP, battle_kind.size), dtype=battle_kind.dtype)
    length = np.zeros(PROMPT_GROUP, dtype=np.int64)
    drawn = np.empty(prompts, dtype=np.int64)
    seen = np.zeros((PROMPT_GROUP, kinds), dtype=np.bool_)
    for group in range(first, stop, PROMPT_GROUP):
        width = min(PROMPT_GROUP, stop - group)
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
                    (PROMPT_GROUP, max(total, 2 * sequence.shape[1])), dtype=battle_kind.dtype
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
elo_draws_compiled = numba.njit(nogil=True, cache=True)(_elo_draws_loop)
_below_compiled = numba.njit(cache=True)(_below)
elo_prompts_compiled = numba.njit(nogil=True, cache=True)(_elo_prompts_loop)
