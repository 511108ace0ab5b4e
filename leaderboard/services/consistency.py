"""The "Consistency" part of a study's report: a typed result computed from the report's frames.

`contrast_inputs_read` is the one database read (the study's latest contrast set, its items and
the texts the drill-down shows); `consistency_compute` works on DataFrames only, through
`leaderboard.stats.consistency`:

- C_res for people and for every pairwise judge on the contrast items (each vote or call);
- swap invariance of every judge from its calls in both orders on the regular pairs;
- the share of intransitive triples for every judge (its verdict per pair, orders combined as
  the report does: agreeing orders give their verdict, disagreeing orders a tie) and for the
  people's majority;
- the contrast items each source got wrong, with both instructions and both answers;
- for score judges (PL models), C_res and C_ins from the four scores h(I_i, r_j) of each
  contrast pair, with and without RewardFusion (`score_consistency_read`, which runs the model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy.special import expit

from annotation.models import ContrastPair, ContrastSet, HumanJudgment, Pair, Study
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun
from leaderboard.plots import Series, bar_chart_svg
from leaderboard.stats.consistency import (
    DEFAULT_FUSION_DELTA,
    RANDOM_CONTRAST_RATE,
    RANDOM_INTRANSITIVE_RATE,
    ConsistencyRate,
    Intransitivity,
    ScoreConsistency,
    SwapInvariance,
    choice_consistency,
    intransitive_triples,
    reward_fusion,
    score_consistency,
    swap_invariance,
)
from leaderboard.stats.likert import collapse
from leaderboard.stats.proportion import Proportion, wilson_interval

HUMAN = "human"
HUMAN_ITEM_COLUMNS = ["pair_id", "label"]
CALL_ITEM_COLUMNS = ["pair_id", "run_id", "order", "label"]
ORDER_INVARIANT_KINDS = frozenset({Judge.Kind.PL, Judge.Kind.LONGER})
"""Judges whose verdict cannot depend on the order shown: a score model scores each answer alone,
and "prefer the longer answer" compares lengths."""
MISSES_SHOWN = 50


@dataclass(frozen=True)
class ContrastItemText:
    """One contrast item as the drill-down shows it: the instruction shown and the other one,
    the answer that belongs (r_A) and the other prompt's answer (r_B)."""

    pair_id: int
    contrast_pair_id: int
    expected: Literal["A", "B"]
    instruction: str
    other_instruction: str
    own_answer: str
    other_answer: str


@dataclass(frozen=True)
class ContrastInputs:
    """The study's latest contrast set (None without one), its items by pair id, and the votes
    on them: human (pair_id, label), calls (pair_id, run_id, order, label), canonical labels.
    The report's vote frames leave contrast items out
    (`leaderboard.selectors.frames.not_contrast_item`), so these are read here."""

    seed: int | None
    low: float | None
    high: float | None
    best: str
    system: str
    pairs: int
    items: Mapping[int, ContrastItemText]
    human: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=HUMAN_ITEM_COLUMNS))
    calls: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CALL_ITEM_COLUMNS))


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
    agreement: Proportion | None = None
    agreement_fused: Proportion | None = None


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


def _first_turn(turns: object) -> str:
    return str(turns[0]) if isinstance(turns, list) and turns else ""


def contrast_inputs_read(*, study: Study, run_ids: Sequence[int] = ()) -> ContrastInputs:
    """Read the study's latest contrast set, the items made from it (texts at turn 1), the
    people's votes on them and the done calls of the runs `run_ids` on them."""
    contrast_set = (
        ContrastSet.objects.filter(study=study).select_related("system").order_by("-pk").first()
    )
    if contrast_set is None:
        return ContrastInputs(None, None, None, "", "", 0, {})
    items = Pair.objects.filter(contrast__contrast_set=contrast_set).select_related(
        "contrast__prompt_a", "contrast__prompt_b", "contrast__answer_a", "contrast__answer_b"
    )
    out: dict[int, ContrastItemText] = {}
    for item in items.order_by("pk"):
        contrast = item.contrast
        assert contrast is not None  # the query follows the item's contrast pair
        shown_a = item.prompt_id == contrast.prompt_a_id
        own, other = (
            (contrast.answer_a, contrast.answer_b)
            if shown_a
            else (contrast.answer_b, contrast.answer_a)
        )
        shown, hidden = (
            (contrast.prompt_a, contrast.prompt_b)
            if shown_a
            else (contrast.prompt_b, contrast.prompt_a)
        )
        out[item.pk] = ContrastItemText(
            pair_id=item.pk,
            contrast_pair_id=contrast.pk,
            expected="A" if own.pk == item.answer_a_id else "B",
            instruction=_first_turn(shown.turns),
            other_instruction=_first_turn(hidden.turns),
            own_answer=_first_turn(own.turns),
            other_answer=_first_turn(other.turns),
        )
    on_items = {"pair_id__in": list(out)}
    human = pd.DataFrame(
        list(
            HumanJudgment.objects.filter(excluded=False, **on_items)
            .exclude(preference="")
            .order_by("pk")
            .values_list("pair_id", "preference")
        ),
        columns=HUMAN_ITEM_COLUMNS,
    )
    calls = pd.DataFrame(
        list(
            JudgeCall.objects.filter(
                run_id__in=list(run_ids), status=JudgeCall.Status.DONE, **on_items
            )
            .exclude(preference="")
            .order_by("pk")
            .values_list("pair_id", "run_id", "order", "preference")
        ),
        columns=CALL_ITEM_COLUMNS,
    )
    return ContrastInputs(
        seed=contrast_set.seed,
        low=contrast_set.low,
        high=contrast_set.high,
        best=contrast_set.best,
        system=contrast_set.system.name if contrast_set.system else "",
        pairs=contrast_set.pairs.count(),
        items=out,
        human=human,
        calls=calls,
    )


@dataclass(frozen=True)
class SourceInfo:
    """A judge source as this section needs it: its name, run and kind."""

    name: str
    run_id: int
    kind: str
    order_invariant: bool = False


@dataclass(frozen=True)
class ScoreJudgeConsistency:
    """A score judge's C_res and C_ins on the contrast pairs, plain and after RewardFusion
    (over ``pool`` scored answers of the study, threshold ``delta``)."""

    plain: ScoreConsistency
    fused: ScoreConsistency
    delta: float
    pool: int
    # Every scored answer's score, plain and fused over the run's other scored answers (for the
    # agreement with people with and without RewardFusion).
    answer_scores: Mapping[int, float] = field(default_factory=dict)
    fused_answer_scores: Mapping[int, float] = field(default_factory=dict)


def _answer_text(turns: object) -> str:
    return "\n\n".join(str(t) for t in turns) if isinstance(turns, list) else ""


def score_consistency_read(
    *, study: Study, run_ids: Sequence[int], delta: float = DEFAULT_FUSION_DELTA
) -> dict[int, ScoreJudgeConsistency]:
    """Score the latest contrast set's four combinations with every PL run's model.

    For each contrast pair, h(I_A, r_A), h(I_A, r_B), h(I_B, r_A), h(I_B, r_B) with the texts
    the PL model scores (all user turns of the prompt, all turns of the answer). RewardFusion's
    retrieval pool is the run's scored answers of the study (each under its own prompt, with its
    stored score) minus the contrast pairs' own answers, so that no query finds itself; every
    scored answer is also fused over all the others (itself left out), for the agreement with
    people with and without fusion. The embedding of an example is that of its
    "question\n\nanswer" text, with the model's backbone encoder (the default encoder for a
    Hugging Face checkpoint). Runs whose judge is not a PL model, or whose artifact is missing,
    are left out.
    """
    from judges.reward.artifacts import ArtifactMissing, artifact_load
    from judges.reward.encoder import DEFAULT_BACKBONE, embed_texts

    contrast_set = ContrastSet.objects.filter(study=study).order_by("-pk").first()
    if contrast_set is None:
        return {}
    pairs = list(
        ContrastPair.objects.filter(contrast_set=contrast_set)
        .select_related("prompt_a", "prompt_b", "answer_a", "answer_b")
        .order_by("pk")
    )
    questions, answers = [], []
    for c in pairs:
        q_a, q_b = _answer_text(c.prompt_a.turns), _answer_text(c.prompt_b.turns)
        r_a, r_b = _answer_text(c.answer_a.turns), _answer_text(c.answer_b.turns)
        questions += [q_a, q_a, q_b, q_b]
        answers += [r_a, r_b, r_a, r_b]
    own = {x for c in pairs for x in (c.answer_a_id, c.answer_b_id)}
    out: dict[int, ScoreJudgeConsistency] = {}
    runs = JudgeRun.objects.filter(pk__in=run_ids, judge__kind=Judge.Kind.PL).select_related(
        "judge"
    )
    for run in runs.order_by("pk"):
        try:
            model = artifact_load(str(run.judge.params.get("artifact", "")))
        except (ArtifactMissing, FileNotFoundError, KeyError):
            continue
        scores = np.asarray(model.score(questions, answers), dtype=np.float64)
        plain = score_consistency(scores.reshape(-1, 2, 2))
        backbone = str(model.metadata.get("backbone") or DEFAULT_BACKBONE)
        scored = [
            (answer_id, f"{_answer_text(q)}\n\n{_answer_text(a)}", score)
            for answer_id, q, a, score in AnswerScore.objects.filter(run=run)
            .order_by("answer_id")
            .values_list("answer_id", "answer__prompt__turns", "answer__turns", "score")
        ]
        queries = embed_texts(
            [f"{q}\n\n{a}" for q, a in zip(questions, answers, strict=True)], backbone=backbone
        )
        vectors = (
            embed_texts([text for _, text, _ in scored], backbone=backbone)
            if scored
            else np.empty((0, queries.shape[1]))
        )
        all_scores = np.array([score for _, _, score in scored], dtype=np.float64)
        in_pool = np.array([answer_id not in own for answer_id, _, _ in scored], dtype=bool)
        pool = int(in_pool.sum())
        fused = reward_fusion(queries, scores, vectors[in_pool], all_scores[in_pool], delta=delta)
        answer_ids = [answer_id for answer_id, _, _ in scored]
        fused_all = (
            reward_fusion(
                vectors, all_scores, vectors, all_scores, delta=delta, leave_out_same_index=True
            ).scores
            if scored
            else all_scores
        )
        out[run.pk] = ScoreJudgeConsistency(
            plain=plain,
            fused=score_consistency(fused.scores.reshape(-1, 2, 2)),
            delta=delta,
            pool=pool,
            answer_scores=dict(zip(answer_ids, all_scores.tolist(), strict=True)),
            fused_answer_scores=dict(zip(answer_ids, fused_all.tolist(), strict=True)),
        )
    return out


@dataclass(frozen=True)
class ConsistencyInputs:
    """What the consistency section reads besides the votes: the contrast items and the score
    judges' C_res and C_ins (by run id)."""

    contrast: ContrastInputs
    scores: Mapping[int, ScoreJudgeConsistency]

    def digest(self) -> str:
        """A text naming everything the section's numbers depend on, for the report's data hash."""
        items = sorted(
            (i.pair_id, i.contrast_pair_id, i.expected) for i in self.contrast.items.values()
        )
        scores = sorted((run, repr(s)) for run, s in self.scores.items())
        c = self.contrast
        votes = (c.human.to_json(orient="values"), c.calls.to_json(orient="values"))
        return repr((c.seed, c.low, c.high, c.best, c.system, c.pairs, items, votes, scores))


NO_CONSISTENCY_INPUTS = ConsistencyInputs(ContrastInputs(None, None, None, "", "", 0, {}), {})


def consistency_inputs_get(*, study: Study, run_ids: Sequence[int]) -> ConsistencyInputs:
    """Read the contrast items and score the contrast pairs with the PL runs among `run_ids`."""
    return ConsistencyInputs(
        contrast=contrast_inputs_read(study=study, run_ids=run_ids),
        scores=score_consistency_read(study=study, run_ids=run_ids),
    )


def _choice_rate(
    frame: pd.DataFrame, contrast: ContrastInputs, source: str, confidence: float
) -> tuple[ConsistencyRate | None, list[ContrastMiss]]:
    """C_res of the verdicts in `frame` (pair_id, label) on contrast items, and the misses."""
    on_items = frame[frame["pair_id"].isin(list(contrast.items))]
    if on_items.empty:
        return None, []
    expected = [contrast.items[int(p)].expected for p in on_items["pair_id"]]
    labels = on_items["label"].astype(str).tolist()
    rate = choice_consistency(labels, expected, confidence=confidence)
    misses = [
        ContrastMiss(source, label, contrast.items[int(pair_id)])
        for pair_id, label, want in zip(on_items["pair_id"], labels, expected, strict=True)
        if label != want
    ]
    return rate, misses[:MISSES_SHOWN]


def _pair_verdicts(calls: pd.DataFrame) -> pd.DataFrame:
    """One verdict per pair from a run's calls: the one order's, or both orders' when they agree,
    else a tie."""
    grouped = calls.groupby("pair_id", sort=True)["label"]
    first, distinct = grouped.first(), grouped.nunique()
    label = np.where(distinct.to_numpy() == 1, first.to_numpy(dtype=object), "tie")
    return pd.DataFrame({"pair_id": first.index.to_numpy(), "label": label})


def _agreement(
    answer_scores: Mapping[int, float],
    pairs: pd.DataFrame,
    human: pd.DataFrame,
    confidence: float,
) -> Proportion:
    """Share of people's votes on pairs with both answers scored that match the score verdict."""
    scored = pd.Series(answer_scores, dtype=np.float64)
    frame = pairs[["pair_id", "answer_a", "answer_b"]].assign(
        h_a=lambda f: f["answer_a"].map(scored), h_b=lambda f: f["answer_b"].map(scored)
    )
    frame = frame.dropna(subset=["h_a", "h_b"])
    # P(B better) = sigmoid(h_B - h_A) on the PL judge's Likert rule (judges.reward.scoring),
    # collapsed with ties: likert = min(8, floor(8 P) + 1); 1-3 A, 4-5 tie, 6-8 B.
    p = expit(frame["h_b"].to_numpy() - frame["h_a"].to_numpy())
    likert = np.minimum(8, np.floor(8 * p).astype(np.int64) + 1)
    verdict = pd.Series(collapse(likert, ties=True), index=frame["pair_id"].to_numpy())
    votes = human[human["pair_id"].isin(verdict.index)]
    agree = int(
        (votes["label"].astype(str).to_numpy() == verdict.loc[votes["pair_id"]].to_numpy()).sum()
    )
    return wilson_interval(agree, len(votes), confidence)


def _triples(verdicts: pd.DataFrame, pairs: pd.DataFrame, confidence: float) -> Intransitivity:
    joined = verdicts.merge(pairs, on="pair_id", how="inner")
    frame = pd.DataFrame(
        {
            "group": list(zip(joined["prompt_id"], joined["turn"], strict=True)),
            "first": joined["answer_a"].to_numpy(),
            "second": joined["answer_b"].to_numpy(),
            "label": joined["label"].astype(str).to_numpy(),
        }
    )
    return intransitive_triples(frame, confidence=confidence)


def _swap(calls: pd.DataFrame, source: SourceInfo, confidence: float) -> SwapInvariance:
    if source.order_invariant or source.kind in ORDER_INVARIANT_KINDS:
        return swap_invariance([], [], order_invariant=True)
    by_order = [
        calls.loc[calls["order"] == order, ["pair_id", "label"]].drop_duplicates("pair_id")
        for order in ("ab", "ba")
    ]
    both = by_order[0].merge(by_order[1], on="pair_id", suffixes=("_ab", "_ba"))
    return swap_invariance(
        both["label_ab"].to_numpy(dtype=object),
        both["label_ba"].to_numpy(dtype=object),
        confidence=confidence,
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
) -> ConsistencyResult:
    """Compute the section from the report's frames and the contrast inputs.

    pairs: pair_id, prompt_id, turn, answer_a, answer_b; calls: pair_id, run_id, order
    ("ab"/"ba"), label (canonical, one row per done call); majority: the people's majority label
    per pair_id; human: pair_id, label (each person's vote on the regular pairs, for a score
    judge's agreement with people with and without RewardFusion). C_res comes from the votes
    on contrast items carried by `contrast`; swap
    invariance and transitivity from the other pairs (contrast items in `pairs`, `calls` or
    `majority` are left out). scores: a score judge's C_res and C_ins by run id
    (`score_consistency_read`); such a judge's C_res comes from its four scores, not from its
    verdicts on contrast items (whose Likert bins have a tie band).
    """
    scores = scores or {}
    items = list(contrast.items)
    regular = pairs[~pairs["pair_id"].isin(items)][
        ["pair_id", "prompt_id", "turn", "answer_a", "answer_b"]
    ]
    rows: list[ConsistencyRow] = []
    misses: list[ContrastMiss] = []

    c_res, missed = _choice_rate(contrast.human, contrast, HUMAN, confidence)
    majority_frame = pd.DataFrame(
        {"pair_id": majority.index.to_numpy(), "label": majority.to_numpy(dtype=object)}
    )
    majority_regular = majority_frame[~majority_frame["pair_id"].isin(items)]
    rows.append(
        ConsistencyRow(
            source=HUMAN,
            kind="people",
            c_res=c_res,
            c_ins=None,
            swap=None,
            transitivity=_triples(majority_regular, regular, confidence),
        )
    )
    misses += missed
    for source in sources:
        run_calls = calls[calls["run_id"] == source.run_id]
        on_regular = run_calls[~run_calls["pair_id"].isin(items)]
        scored = scores.get(source.run_id)
        c_ins: ConsistencyRate | None = None
        if scored is not None:
            c_res, c_ins, missed = scored.plain.c_res, scored.plain.c_ins, []
        else:
            item_calls = contrast.calls[contrast.calls["run_id"] == source.run_id]
            c_res, missed = _choice_rate(
                item_calls[["pair_id", "label"]], contrast, source.name, confidence
            )
        rows.append(
            ConsistencyRow(
                source=source.name,
                kind=source.kind,
                c_res=c_res,
                c_ins=c_ins,
                swap=_swap(on_regular, source, confidence),
                transitivity=_triples(_pair_verdicts(on_regular), regular, confidence),
                fused=scored.fused if scored is not None else None,
                agreement=_agreement(scored.answer_scores, regular, human, confidence)
                if scored is not None and human is not None
                else None,
                agreement_fused=_agreement(scored.fused_answer_scores, regular, human, confidence)
                if scored is not None and human is not None
                else None,
            )
        )
        misses += missed
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
)
MISS_COLUMNS = (
    "source",
    "verdict",
    "instruction shown",
    "its answer (r_A)",
    "other instruction",
    "other answer (r_B)",
)


def _cells(proportion: Proportion | None) -> tuple[float | None, float | None, float | None]:
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


def consistency_table_rows(result: ConsistencyResult) -> list[tuple[object, ...]]:
    """One row per source in TABLE_COLUMNS order; None where a measure is not defined (C_ins for
    pairwise verdicts, swap invariance for people) or has no data."""
    rows = []
    for row in result.rows:
        c_res = row.c_res.proportion if row.c_res else None
        t = row.transitivity
        rows.append(
            (
                row.source,
                row.kind,
                *_cells(c_res),
                c_res.count if c_res else None,
                c_res.total if c_res else None,
                row.c_res.ties if row.c_res else None,
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
            )
        )
    return rows


def consistency_table_note(result: ConsistencyResult) -> str:
    """The table's note: the contrast set used and the random baselines."""
    return (
        f"{result.message} C_res: share of verdicts on contrast items that pick the answer "
        f"belonging to the instruction shown (ties count as misses; random: "
        f"{RANDOM_CONTRAST_RATE:.0%}); for a score judge, from its four scores of each pair, both "
        "directions counted. C_ins (score judges only): an answer scores higher under its own "
        "instruction; not defined for pairwise verdicts. *_fused: the same after RewardFusion "
        f"(Eq. 4, δ = {DEFAULT_FUSION_DELTA}); agreement_with_people: a score judge's verdicts "
        "against each person's vote on the regular pairs (ties a class), without and with it. "
        "Swap invariance: share of pairs called in both "
        "orders with the same collapsed verdict. Intransitive: share of cyclic triples among "
        "triples judged in all three pairs without a tie (random: "
        f"{RANDOM_INTRANSITIVE_RATE:.0%}). Intervals: Wilson 95%."
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
    """C_res and the intransitive-triple rate per source as bars with Wilson whiskers; None when
    no source has either."""
    names = [row.source for row in result.rows]
    c_res = [row.c_res.proportion if row.c_res else None for row in result.rows]
    cyc = [row.transitivity.proportion if row.transitivity else None for row in result.rows]
    if all(p is None or p.share is None for p in [*c_res, *cyc]):
        return None

    def series(name: str, props: Sequence[Proportion | None]) -> Series:
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
