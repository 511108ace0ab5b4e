"""Consistency: does a source recognise which answer belongs to which instruction (Contrast
Instructions, Shen et al. 2023), and are its verdicts stable under swapping and chaining?

`consistency_compute` works on the report's frames and the contrast inputs (its declared read
`CONSISTENCY`, from `leaderboard.selectors.contrast`), through `leaderboard.stats.consistency`:

- C_res for people (each item's majority of its raters) and for every pairwise judge (its
  verdict per item, orders combined) on the contrast items, with each vote and each call as
  named extras; intervals resample contrast pairs;
- swap invariance of every judge from its calls in both orders on the regular pairs;
- the share of intransitive triples for every judge (its verdict per pair, orders combined as
  the report does: agreeing orders give their verdict, disagreeing orders a tie) and for the
  people's majority;
- the contrast items each source got wrong, with both instructions and both answers;
- for score judges (PL models), C_res and C_ins from the four scores h(I_i, r_j) of each
  contrast pair (one comparison per pair, Eq. 2 and 3; both directions as named extras), with
  and without RewardFusion, what the fusion retrieved, and their agreement with people.

See docs/consistency.md for every definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from judges.kinds import judge_kind
from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import HUMAN, Plot, RenderContext, ReportData, Section, Table
from leaderboard.selectors.contrast import (
    ContrastInputs,
    ContrastItemText,
    ScoreJudgeConsistency,
)
from leaderboard.selectors.section_reads import CONSISTENCY, LENGTHS
from leaderboard.stats.bootstrap import ClusterProportion
from leaderboard.stats.consistency import (
    DEFAULT_FUSION_DELTA,
    RANDOM_CONTRAST_RATE,
    RANDOM_INTRANSITIVE_RATE,
    ConsistencyRate,
    FusionRetrieval,
    Intransitivity,
    PairRepeated,
    ScoreConsistency,
    SwapInvariance,
    choice_consistency,
    intransitive_triples_coded,
    score_agreement,
    swap_invariance,
)
from leaderboard.stats.majority import LABELS, people_majority
from leaderboard.stats.mtbench import CALL_ORDERS, judge_votes_combine
from leaderboard.stats.proportion import Proportion

if TYPE_CHECKING:
    import pandas as pd

MISSES_SHOWN = 50


@dataclass(frozen=True)
class ContrastMiss:
    """A contrast item a source answered wrongly: its verdict (canonical A, B or tie) and, of the
    two answers, the one that belongs is ``expected``."""

    source: str
    verdict: str
    item: ContrastItemText


@dataclass(frozen=True)
class ConsistencyRow:
    """One source's consistency: people (``kind`` "people") or a judge (its kind)."""

    source: str
    kind: str
    c_res: ConsistencyRate | None
    c_ins: ConsistencyRate | None
    swap: SwapInvariance | None
    transitivity: Intransitivity | None
    fused: ScoreConsistency | None = None
    # Score judges: agreement of their verdicts with each person's vote (ties a class), plain
    # and after RewardFusion.
    agreement: ClusterProportion | None = None
    agreement_fused: ClusterProportion | None = None
    # Named extras: C_res over every vote (people) or every call (pairwise judges), where
    # c_res is one verdict per item; C_res and C_ins of a score judge counted in both
    # directions of each contrast pair, where c_res and c_ins count one comparison per pair.
    c_res_per_vote: ConsistencyRate | None = None
    c_res_both_directions: ConsistencyRate | None = None
    c_ins_both_directions: ConsistencyRate | None = None
    # Score judges: what RewardFusion retrieved for the contrast queries and for every scored
    # answer (the agreement with people after fusion).
    retrieval: FusionRetrieval | None = None
    answer_retrieval: FusionRetrieval | None = None


@dataclass(frozen=True)
class ConsistencyResult:
    """The section's result: the contrast set used, one row per source, the wrong answers."""

    contrast_seed: int | None
    contrast_window: tuple[float, float] | None
    contrast_best: str
    contrast_system: str
    contrast_pairs: int
    contrast_items: int
    message: str
    rows: tuple[ConsistencyRow, ...]
    misses: tuple[ContrastMiss, ...]


@dataclass(frozen=True)
class SourceInfo:
    """A judge source as this section needs it: its name, run and kind."""

    name: str
    run_id: int
    kind: str
    order_invariant: bool = False


@dataclass(frozen=True)
class _Bootstrap:
    """How the section's intervals resample: ``by_cluster`` (the report's ``resample`` is
    "prompt") resamples contrast pairs and prompts, else each verdict or group on its own."""

    by_cluster: bool
    rounds: int
    seed: int
    confidence: float


def _choice_rate(
    frame: pd.DataFrame,
    contrast: ContrastInputs,
    boot: _Bootstrap,
    unit: str,
) -> ConsistencyRate | None:
    """C_res of the verdicts in `frame` (pair_id, label) on contrast items, each counted, the
    interval over contrast pairs (or verdicts)."""
    on_items = frame[frame["pair_id"].isin(list(contrast.items))]
    if on_items.empty:
        return None
    items = [contrast.items[int(p)] for p in on_items["pair_id"]]
    return choice_consistency(
        on_items["label"].astype(str).tolist(),
        [i.expected for i in items],
        [i.contrast_pair_id for i in items] if boot.by_cluster else None,
        unit=unit,
        resampled="contrast pair" if boot.by_cluster else unit,
        rounds=boot.rounds,
        seed=boot.seed,
        confidence=boot.confidence,
    )


def _misses(verdicts: pd.DataFrame, contrast: ContrastInputs, source: str) -> list[ContrastMiss]:
    """The items whose one verdict (pair_id, label) is not the answer that belongs."""
    misses = [
        ContrastMiss(source, str(label), contrast.items[int(pair_id)])
        for pair_id, label in zip(verdicts["pair_id"], verdicts["label"], strict=True)
        if int(pair_id) in contrast.items and str(label) != contrast.items[int(pair_id)].expected
    ]
    return misses[:MISSES_SHOWN]


def _item_majority(human: pd.DataFrame) -> pd.DataFrame:
    """Each contrast item's people's majority (pair_id, label): the unique most common vote,
    a tie when two labels share the most votes (`people_majority`)."""
    import pandas as pd

    majority = people_majority(human[["pair_id", "label"]]) if not human.empty else pd.Series()
    return pd.DataFrame(
        {"pair_id": majority.index.to_numpy(), "label": majority.to_numpy(dtype=object)}
    )


def _item_verdicts(calls: pd.DataFrame) -> pd.DataFrame:
    """A judge's one verdict per contrast item (pair_id, label): its orders combined as the
    report combines them (agreeing orders give their verdict, disagreeing ones a tie)."""
    import pandas as pd

    if calls.empty:
        return pd.DataFrame(columns=["pair_id", "label"])
    return judge_votes_combine(calls.assign(likert=np.nan))[["pair_id", "label"]].assign(
        label=lambda f: f["label"].astype(str)
    )


def _pair_verdicts(calls: pd.DataFrame) -> pd.DataFrame:
    """One verdict per pair from a run's calls (pair_id, label), as the report combines orders:
    agreeing orders give their verdict, disagreeing ones a tie, one order its own."""
    return judge_votes_combine(calls)[["pair_id", "label"]]


def _group_codes(
    prompt_id: npt.NDArray[np.int64], turn: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """One non-negative integer per (prompt, turn): the two factorized codes combined."""
    import pandas as pd

    prompt_code, _ = pd.factorize(prompt_id)
    turn_code, turns = pd.factorize(turn)
    return np.asarray(prompt_code, dtype=np.int64) * max(len(turns), 1) + turn_code


@dataclass(frozen=True)
class _RegularPairs:
    """The regular pairs as integer arrays sorted by pair id, for `_triples`: each pair's group
    (its prompt and turn, numbered) and its two answers."""

    pair_id: npt.NDArray[np.int64]
    prompt_id: npt.NDArray[np.int64]
    turn: npt.NDArray[np.int64]
    group: npt.NDArray[np.int64]
    answer_a: npt.NDArray[np.int64]
    answer_b: npt.NDArray[np.int64]

    @classmethod
    def of(cls, pairs: pd.DataFrame) -> _RegularPairs | None:
        """The arrays, or None when a pair id repeats (then `_triples` joins as a merge)."""
        pair_id = pairs["pair_id"].to_numpy(dtype=np.int64)
        order = np.argsort(pair_id, kind="stable")
        pair_id = pair_id[order]
        if (pair_id[1:] == pair_id[:-1]).any():
            return None
        prompt_id = pairs["prompt_id"].to_numpy(dtype=np.int64)[order]
        turn = pairs["turn"].to_numpy(dtype=np.int64)[order]
        group = _group_codes(prompt_id, turn)
        return cls(
            pair_id,
            prompt_id,
            turn,
            group,
            pairs["answer_a"].to_numpy(dtype=np.int64)[order],
            pairs["answer_b"].to_numpy(dtype=np.int64)[order],
        )


def _triples(
    verdicts: pd.DataFrame,
    pairs: pd.DataFrame,
    boot: _Bootstrap,
    coded: _RegularPairs | None = None,
) -> Intransitivity:
    """The intransitive triples of `verdicts` (pair_id, label) on `pairs`, each pair's group its
    prompt and turn and its items its two answers (`coded`: `pairs` as `_RegularPairs.of`); the
    interval resamples prompts (or, resampling votes, each prompt and turn on its own)."""
    if coded is None:
        joined = verdicts.merge(pairs, on="pair_id", how="inner")
        prompt_id = joined["prompt_id"].to_numpy()
        turn = joined["turn"].to_numpy()
        answer_a = joined["answer_a"].to_numpy()
        answer_b = joined["answer_b"].to_numpy()
        group = _group_codes(prompt_id, turn)
        labels = joined["label"]
    else:
        # The inner join on pair id, in the verdicts' order, by a search in the sorted ids.
        ids = verdicts["pair_id"].to_numpy(dtype=np.int64)
        at = np.minimum(np.searchsorted(coded.pair_id, ids), max(coded.pair_id.size - 1, 0))
        found = coded.pair_id[at] == ids if coded.pair_id.size else np.zeros(ids.size, bool)
        at = at[found]
        prompt_id, turn, group = coded.prompt_id[at], coded.turn[at], coded.group[at]
        answer_a, answer_b = coded.answer_a[at], coded.answer_b[at]
        labels = verdicts["label"][found]
    try:
        return intransitive_triples_coded(
            group,
            answer_a,
            answer_b,
            labels.to_numpy(),
            confidence=boot.confidence,
            clusters=prompt_id if boot.by_cluster else None,
            resampled="prompt" if boot.by_cluster else "prompt and turn",
            rounds=boot.rounds,
            seed=boot.seed,
        )
    except PairRepeated as error:
        row, where = error.row, (prompt_id[error.row], turn[error.row])
        if error.kind == "self":
            raise ValueError(
                f"group {where!r}: item {answer_a[row]!r} is compared with itself"
            ) from None
        raise ValueError(
            f"group {where!r}: the pair ({answer_a[row]!r}, {answer_b[row]!r}) has more than "
            "one verdict; collapse votes to one verdict per pair first"
        ) from None


def _swap(
    calls: pd.DataFrame, source: SourceInfo, boot: _Bootstrap, prompt_of: pd.Series
) -> SwapInvariance:
    """Swap invariance from a run's calls: each pair's first call in each order (row order),
    on the pairs called in both."""
    import pandas as pd

    if source.order_invariant or judge_kind(source.kind).order_invariant:
        return swap_invariance([], [], order_invariant=True)
    pair_id = calls["pair_id"].to_numpy()
    order = pd.Categorical(calls["order"], categories=CALL_ORDERS).codes
    labels = pd.Categorical(calls["label"], categories=LABELS)
    first: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
    for code in (CALL_ORDERS.index("ab"), CALL_ORDERS.index("ba")):
        rows = np.flatnonzero(order == code)
        # numpy.unique's indices are those of each id's first occurrence.
        ids, at = np.unique(pair_id[rows], return_index=True)
        first.append((ids, rows[at]))
    _, in_ab, in_ba = np.intersect1d(
        first[0][0], first[1][0], assume_unique=True, return_indices=True
    )
    both = first[0][0][in_ab]
    return swap_invariance(
        labels[first[0][1][in_ab]],
        labels[first[1][1][in_ba]],
        prompt_of.reindex(both).to_numpy() if boot.by_cluster else None,
        confidence=boot.confidence,
        rounds=boot.rounds,
        seed=boot.seed,
    )


def consistency_compute(
    *,
    pairs: pd.DataFrame,
    calls: pd.DataFrame,
    majority: pd.Series,
    human: pd.DataFrame | None = None,
    sources: Sequence[SourceInfo],
    contrast: ContrastInputs,
    scores: Mapping[int, ScoreJudgeConsistency] | None = None,
    confidence: float = 0.95,
    rounds: int = 1000,
    seed: int = 0,
    resample: str = "prompt",
) -> ConsistencyResult:
    """Compute the section from the report's frames and the contrast inputs.

    pairs: pair_id, prompt_id, turn, answer_a, answer_b; calls: pair_id, run_id, order
    ("ab"/"ba"), label (canonical), likert (one row per done call, as the vote frames carry
    them); majority: the people's majority label per pair_id; human: pair_id, label (each
    person's vote on the regular pairs, for a score judge's agreement with people with and
    without RewardFusion). C_res comes from the votes on contrast items carried by `contrast`:
    one verdict per item (the people's majority of the item's raters, as the paper's human
    estimate; a judge's orders combined), each vote and each call a named extra; swap
    invariance and transitivity from the other pairs (contrast items in `pairs`, `calls` or
    `majority` are left out). scores: a score judge's four scores by run id
    (`leaderboard.selectors.contrast.score_consistency_read`); such a judge's C_res and C_ins
    come from them, one comparison per contrast pair (Eq. 2 and 3), not from its verdicts on
    contrast items (whose Likert bins have a tie band). Intervals: bootstrap over contrast pairs
    (C_res of pairwise verdicts, a score judge's both-direction extras) and over prompts
    (intransitive triples) with `rounds` and `seed` when `resample` is "prompt", over each
    verdict or prompt and turn otherwise; Wilson over the independent contrast pairs for a
    score judge's C_res and C_ins.
    """
    import pandas as pd

    scores = scores or {}
    boot = _Bootstrap(resample == "prompt", rounds, seed, confidence)
    score_params = {"confidence": confidence, "rounds": rounds, "seed": seed}
    items = list(contrast.items)
    regular = pairs[~pairs["pair_id"].isin(items)][
        ["pair_id", "prompt_id", "turn", "answer_a", "answer_b"]
    ]
    coded = _RegularPairs.of(regular)
    prompt_of = regular.set_index("pair_id")["prompt_id"]
    by_prompt = prompt_of if boot.by_cluster else None

    def with_people_share(
        answer_scores: Mapping[int, float], temperature: float
    ) -> ClusterProportion | None:
        """A score judge's agreement with each person's vote, with its interval over prompts."""
        if human is None:
            return None
        return score_agreement(
            answer_scores,
            regular,
            human,
            prompts=by_prompt,
            confidence=confidence,
            rounds=rounds,
            seed=seed,
            temperature=temperature,
        )

    rows: list[ConsistencyRow] = []
    misses: list[ContrastMiss] = []

    people_items = _item_majority(contrast.human)
    majority_frame = pd.DataFrame(
        {"pair_id": majority.index.to_numpy(), "label": majority.to_numpy(dtype=object)}
    )
    majority_regular = majority_frame[~majority_frame["pair_id"].isin(items)]
    rows.append(
        ConsistencyRow(
            source=HUMAN,
            kind="people",
            c_res=_choice_rate(people_items, contrast, boot, "item (majority of its raters)"),
            c_ins=None,
            swap=None,
            transitivity=_triples(majority_regular, regular, boot, coded),
            c_res_per_vote=_choice_rate(contrast.human, contrast, boot, "vote"),
        )
    )
    misses += _misses(people_items, contrast, HUMAN)
    for source in sources:
        run_calls = calls[calls["run_id"] == source.run_id]
        on_regular = run_calls[~run_calls["pair_id"].isin(items)]
        scored = scores.get(source.run_id)
        transitivity = _triples(_pair_verdicts(on_regular), regular, boot, coded)
        swap = _swap(on_regular, source, boot, prompt_of)
        if scored is not None:
            plain, fused = scored.plain(**score_params), scored.fused(**score_params)
            rows.append(
                ConsistencyRow(
                    source=source.name,
                    kind=source.kind,
                    c_res=plain.c_res,
                    c_ins=plain.c_ins,
                    swap=swap,
                    transitivity=transitivity,
                    fused=fused,
                    agreement=with_people_share(scored.answer_scores, scored.temperature),
                    agreement_fused=with_people_share(
                        scored.fused_answer_scores, scored.temperature
                    ),
                    c_res_both_directions=plain.c_res_both_directions,
                    c_ins_both_directions=plain.c_ins_both_directions,
                    retrieval=scored.retrieval,
                    answer_retrieval=scored.answer_retrieval,
                )
            )
            continue
        item_calls = contrast.calls[contrast.calls["run_id"] == source.run_id]
        verdicts = _item_verdicts(item_calls)
        rows.append(
            ConsistencyRow(
                source=source.name,
                kind=source.kind,
                c_res=_choice_rate(verdicts, contrast, boot, "item (orders combined)"),
                c_ins=None,
                swap=swap,
                transitivity=transitivity,
                c_res_per_vote=_choice_rate(
                    item_calls[["pair_id", "label"]], contrast, boot, "call"
                ),
            )
        )
        misses += _misses(verdicts, contrast, source.name)
    if contrast.seed is None:
        message = (
            "No contrast set for this study: build one with `manage.py build_contrast_set "
            "--items` to measure C_res."
        )
    elif not contrast.items:
        message = (
            f"The contrast set (seed {contrast.seed}) has {contrast.pairs} pairs but no items "
            "yet: make them with `generate_pairs --strategy contrast`."
        )
    else:
        message = (
            f"{contrast.pairs} contrast pairs (seed {contrast.seed}, question cosine in "
            f"[{contrast.low:g}, {contrast.high:g}], best answer: {contrast.best}"
            + (f" {contrast.system}" if contrast.system else "")
            + f"), {len(contrast.items)} items."
        )
    window = (
        (contrast.low, contrast.high)
        if contrast.low is not None and contrast.high is not None
        else None
    )
    return ConsistencyResult(
        contrast_seed=contrast.seed,
        contrast_window=window,
        contrast_best=contrast.best,
        contrast_system=contrast.system,
        contrast_pairs=contrast.pairs,
        contrast_items=len(contrast.items),
        message=message,
        rows=tuple(rows),
        misses=tuple(misses),
    )


# --- Tables and plot --------------------------------------------------------------------------

TABLE_COLUMNS = (
    "source",
    "kind",
    "c_res",
    "c_res_lower",
    "c_res_upper",
    "c_res_count",
    "c_res_total",
    "c_res_ties",
    "c_res_unit",
    "c_res_interval",
    "c_ins",
    "c_ins_lower",
    "c_ins_upper",
    "c_res_fused",
    "c_ins_fused",
    "agreement_with_people",
    "agreement_fused",
    "swap_invariance",
    "swap_lower",
    "swap_upper",
    "swap_total",
    "intransitive_rate",
    "intransitive_lower",
    "intransitive_upper",
    "intransitive_triples",
    "triples",
    "tied_triples",
    "intransitive_interval",
    "c_res_per_vote",
    "c_res_per_vote_total",
    "c_res_both_directions",
    "c_ins_both_directions",
)
FUSION_COLUMNS = (
    "source",
    "queries",
    "delta",
    "pool",
    "queries_with_neighbours",
    "neighbours",
    "neighbour_cosine_mean",
    "neighbour_cosine_max",
    "nearest_cosine_median",
    "same_prompt_left_out",
)
MISS_COLUMNS = (
    "source",
    "verdict",
    "instruction shown",
    "its answer (r_A)",
    "other instruction",
    "other answer (r_B)",
)


def _cells(
    proportion: Proportion | ClusterProportion | None,
) -> tuple[float | None, float | None, float | None]:
    if proportion is None:
        return None, None, None
    return proportion.share, proportion.lower, proportion.upper


def _swap_cells(swap: SwapInvariance | None) -> tuple[object, ...]:
    if swap is None:
        return (None, None, None, None)
    if swap.order_invariant:
        return ("order-invariant by construction", None, None, None)
    assert swap.proportion is not None
    return (*_cells(swap.proportion), swap.proportion.total)


def interval_label(p: ClusterProportion | None) -> str | None:
    """How an interval was made, in words: "Wilson over contrast pairs", "bootstrap over
    prompts (1000 rounds)"; None without a share."""
    if p is None or p.share is None:
        return None
    if p.method == "wilson":
        return f"Wilson over {p.resampled}s"
    if p.lower is None:
        return f"none: {p.clusters} {p.resampled}(s), too few to resample"
    return f"bootstrap over {p.clusters} {p.resampled}s ({p.rounds} rounds)"


def consistency_table_rows(result: ConsistencyResult) -> list[tuple[object, ...]]:
    """One row per source in TABLE_COLUMNS order; None where a measure is not defined (C_ins for
    pairwise verdicts, swap invariance for people) or has no data."""
    rows = []
    for row in result.rows:
        c_res = row.c_res.proportion if row.c_res else None
        t = row.transitivity
        per_vote = row.c_res_per_vote.proportion if row.c_res_per_vote else None
        rows.append(
            (
                row.source,
                row.kind,
                *_cells(c_res),
                c_res.count if c_res else None,
                c_res.total if c_res else None,
                row.c_res.ties if row.c_res else None,
                c_res.unit if c_res else None,
                interval_label(c_res),
                *_cells(row.c_ins.proportion if row.c_ins else None),
                row.fused.c_res.proportion.share if row.fused else None,
                row.fused.c_ins.proportion.share if row.fused else None,
                row.agreement.share if row.agreement else None,
                row.agreement_fused.share if row.agreement_fused else None,
                *_swap_cells(row.swap),
                *_cells(t.proportion if t else None),
                t.intransitive if t else None,
                t.triples if t else None,
                t.tied_triples if t else None,
                interval_label(t.proportion) if t else None,
                per_vote.share if per_vote else None,
                per_vote.total if per_vote else None,
                row.c_res_both_directions.proportion.share if row.c_res_both_directions else None,
                row.c_ins_both_directions.proportion.share if row.c_ins_both_directions else None,
            )
        )
    return rows


def consistency_fusion_rows(result: ConsistencyResult) -> list[tuple[object, ...]]:
    """What RewardFusion retrieved, per score judge: for its contrast queries and for every
    scored answer (FUSION_COLUMNS order)."""
    out: list[tuple[object, ...]] = []
    for row in result.rows:
        for label, r in (("contrast queries", row.retrieval), ("answers", row.answer_retrieval)):
            if r is None:
                continue
            out.append(
                (
                    row.source,
                    f"{label} ({r.queries})",
                    r.delta,
                    r.pool,
                    r.queries_with_neighbours,
                    r.neighbours,
                    r.neighbour_cosine_mean,
                    r.neighbour_cosine_max,
                    r.nearest_cosine_median,
                    r.same_prompt_left_out,
                )
            )
    return out


def consistency_table_note(result: ConsistencyResult) -> str:
    """The table's note: the contrast set used, the units counted, the intervals and the random
    baselines, and which of the paper's figures a statistic compares with."""
    return (
        f"{result.message} C_res: share of contrast items where the verdict picks the answer "
        "belonging to the instruction shown, one verdict per item: for people the majority of "
        "the item's raters (a tied majority is a miss), for a pairwise judge its orders combined "
        "(disagreeing orders a tie); ties count as misses (random: "
        f"{RANDOM_CONTRAST_RATE:.0%}). c_res_per_vote: the same over every vote or call (a named "
        "extra). For a score judge, C_res and C_ins count one comparison per contrast pair, as "
        "the paper's Eq. 2 and 3: C_res = share of h(I_A, r_A) > h(I_A, r_B), C_ins = share of "
        "h(I_A, r_A) > h(I_B, r_A); c_res_both_directions / c_ins_both_directions count both "
        "directions of each pair (2 per pair, a named extra). C_ins is not defined for pairwise "
        "verdicts. *_fused: the same after RewardFusion (Eq. 4, "
        f"δ = {DEFAULT_FUSION_DELTA}, neighbours from other prompts' answers; what it retrieved "
        "is in the next table); agreement_with_people: a score judge's verdicts against each "
        "person's vote on the regular pairs (ties a class), without and with it. Swap "
        "invariance: share of pairs called in both orders with the same collapsed verdict "
        "(Wilson). Intransitive: share of cyclic triples among triples judged in all three pairs "
        f"without a tie (random: {RANDOM_INTRANSITIVE_RATE:.0%}). Intervals 95%, as each row's "
        "c_res_interval and intransitive_interval say: a bootstrap over contrast pairs (the two "
        "items of a pair share their answers) or prompts (a prompt's triples share its pairs), "
        "Wilson over independent contrast pairs. The paper's human estimate (82.8% C_res, "
        "81.7% C_ins, majority of three annotators) compares with the people's c_res, not with "
        "c_res_per_vote; its reward models' figures (53.6% / 49.4% for LLaMa-7B) with a score "
        "judge's c_res and c_ins, not with the both-direction extras."
    )


def consistency_miss_rows(result: ConsistencyResult) -> list[tuple[str, ...]]:
    """The contrast items each source got wrong (at most MISSES_SHOWN per source), as text."""
    return [
        (
            miss.source,
            "tie" if miss.verdict == "tie" else "the other answer",
            miss.item.instruction,
            miss.item.own_answer,
            miss.item.other_instruction,
            miss.item.other_answer,
        )
        for miss in result.misses
    ]


def consistency_plot_svg(result: ConsistencyResult) -> str | None:
    """C_res and the intransitive-triple rate per source as bars with their whiskers; None when
    no source has either."""
    names = [row.source for row in result.rows]
    c_res = [row.c_res.proportion if row.c_res else None for row in result.rows]
    cyc = [row.transitivity.proportion if row.transitivity else None for row in result.rows]
    if all(p is None or p.share is None for p in [*c_res, *cyc]):
        return None

    def series(name: str, props: Sequence[Proportion | ClusterProportion | None]) -> Series:
        cells = [_cells(p) for p in props]
        return Series(
            name,
            [c[0] for c in cells],
            [c[1] for c in cells],
            [c[2] for c in cells],
        )

    return bar_chart_svg(
        title="Consistency: C_res (random 50%) and intransitive triples (random 25%)",
        categories=names,
        series=[series("C_res", c_res), series("intransitive triples", cyc)],
        y_label="share",
        y_min=0.0,
        y_max=1.0,
    )


# --- The section ------------------------------------------------------------------------------


class ConsistencySection(Section[ConsistencyResult]):
    key = "consistency"
    title = "Consistency"
    definition = (
        "C_res: share of contrast items where the answer that belongs to the instruction wins; "
        "C_ins (score judges): an answer scores higher under its own instruction; swap "
        "invariance; share of intransitive triples."
    )
    result_type = ConsistencyResult
    reads = (
        CONSISTENCY,
        LENGTHS,
    )

    def compute(self, data: ReportData) -> ConsistencyResult:
        inputs = data.read(CONSISTENCY)
        lengths = data.read(LENGTHS).frame
        answers = lengths[["pair_id", "answer_a_id", "answer_b_id"]].rename(
            columns={"answer_a_id": "answer_a", "answer_b_id": "answer_b"}
        )
        pairs = data.votes.pairs[["pair_id", "prompt_id", "turn"]].merge(
            answers.drop_duplicates("pair_id"), on="pair_id", how="inner"
        )
        return consistency_compute(
            pairs=pairs,
            calls=data.votes.calls,
            human=data.votes.human[["pair_id", "label"]],
            majority=data.majority,
            sources=[SourceInfo(s.name, s.run_id, s.judge_kind) for s in data.votes.sources],
            contrast=inputs.contrast,
            scores=inputs.scores,
            confidence=data.params.confidence,
            rounds=data.params.ci_rounds,
            seed=data.params.seed,
            resample=data.params.resample,
        )

    def tables(self, result: ConsistencyResult, context: RenderContext) -> list[Table]:
        tables = [
            Table(
                "consistency",
                "Consistency per source",
                TABLE_COLUMNS,
                tuple(consistency_table_rows(result)),
                note=consistency_table_note(result),
            )
        ]
        fusion = consistency_fusion_rows(result)
        if fusion:
            tables.append(
                Table(
                    "consistency-fusion",
                    "What RewardFusion retrieved",
                    FUSION_COLUMNS,
                    tuple(fusion),
                    note=(
                        "Per score judge: the contrast queries (four per contrast pair) and every "
                        "scored answer (for the agreement with people after fusion), the pool "
                        "each could retrieve from, how many found neighbours with cosine above "
                        "δ, the neighbours' mean and largest cosine, the median of each query's "
                        "nearest allowed cosine, and the examples above δ left out because they "
                        "answer the query's own prompt (or, for a contrast query, the other "
                        "prompt of its pair): Eq. 4 retrieves other instructions' examples."
                    ),
                )
            )
        if result.contrast_items:
            tables.append(
                Table(
                    "consistency-misses",
                    "Contrast items answered wrongly",
                    MISS_COLUMNS,
                    tuple(consistency_miss_rows(result)),
                    note=(
                        "Each row: the instruction shown with its own answer (r_A) and the answer "
                        "to the other, similar instruction (r_B), where the source did not prefer "
                        "r_A (people: the item's majority; a pairwise judge: its orders "
                        "combined). Score judges are left out here (their C_res counts four "
                        "scores). At most 50 rows per source."
                    ),
                )
            )
        return tables

    def plots(self, result: ConsistencyResult, context: RenderContext) -> list[Plot]:
        svg = consistency_plot_svg(result)
        if svg is None:
            return []
        return [
            Plot(
                "consistency",
                "C_res and intransitive triples per source",
                svg,
                note=(
                    "Bars: shares with 95% whiskers (C_res: bootstrap over contrast pairs, or "
                    "Wilson over independent pairs for a score judge; triples: bootstrap over "
                    "prompts); random: C_res 50%, triples 25%."
                ),
            )
        ]


SECTION = ConsistencySection()
