"""Position bias: whether people and judges favour the answer shown first (the H4 study's
histogram of shown Likert scores; Zheng et al. 2023, section 3.3, for the flip rate)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
from django.utils.text import slugify

from leaderboard.lookup import rows_of_run
from leaderboard.plots import histogram_svg
from leaderboard.report.base import (
    HUMAN,
    Plot,
    RenderContext,
    ReportData,
    Section,
    Table,
    from_json,
    share_over_prompts,
    to_json,
)
from leaderboard.selectors.section_reads import INCONSISTENCY
from leaderboard.stats.bias import flips as flips_of
from leaderboard.stats.bias import position_bias
from leaderboard.stats.bootstrap import ClusterProportion
from leaderboard.stats.majority import LABELS
from leaderboard.stats.mtbench import CALL_ORDERS
from leaderboard.stats.proportion import Proportion, wilson_interval

if TYPE_CHECKING:
    import pandas as pd

NO_HISTOGRAM = (
    "No position-bias histogram: no shown Likert scores are recorded in this selection (imported "
    "preferences carry neither a score nor the order shown)."
)


ORDER_INVARIANT_KIND = "pl"
ORDER_INVARIANT = "order-invariant by construction"
ORDER_INVARIANT_NOTE = (
    "A Plackett-Luce reward model scores each answer alone and derives a pair's verdict from the "
    "two scores, so it has no position bias to measure: its row says so instead of a share."
)


INTERVAL_NOTE = (
    "Intervals (prefers first shown, flip rate): a bootstrap over prompts, every vote, call or "
    "pair of a drawn prompt (interval unit: prompt), since the votes on one prompt are not "
    "independent."
)
MARKED_NOTE = (
    "Marked inconsistent: for imported verdicts, the share the source itself marked "
    '"inconsistent" (its two orders disagreed, as in MT-Bench\'s GPT-4 pair verdicts).'
)


# The share of a run's hits (one per vote, call or pair, with its pair id) with its interval:
# the report's bootstrap over prompts (leaderboard.report.base.share_over_prompts).
ShareFn = Callable[[npt.NDArray[Any], npt.NDArray[np.int64], str], ClusterProportion]


@dataclass(frozen=True)
class HumanBias:
    histogram: dict[int, int] | None
    prefers_first: ClusterProportion
    judgments_with_order: int


@dataclass(frozen=True)
class JudgeBias:
    histogram: dict[int, int] | None
    prefers_first: ClusterProportion
    flip_rate: ClusterProportion | None
    calls_with_order: int
    # Imported verdicts only: the share the source itself marked "inconsistent" (its two orders
    # disagreed; MT-Bench's GPT-4 pair verdicts), of those with a verdict label. Wilson over
    # the verdicts: the import keeps only the run's two counts, not which pairs they were.
    inconsistent: Proportion | None = None
    # A reward model scores each answer alone: its verdict cannot depend on the order shown.
    order_invariant: bool = False


@dataclass(frozen=True)
class PositionBiasResult:
    human: HumanBias
    judges: dict[str, JudgeBias]


def _human_bias(human: pd.DataFrame, confidence: float, share: ShareFn) -> HumanBias:
    """People's position bias: shown scores and the share choosing the answer shown first."""
    shown = human.dropna(subset=["likert_shown"])
    histogram = None
    if not shown.empty:
        histogram = position_bias(
            shown["likert_shown"].astype(int).to_numpy(), confidence=confidence
        ).histogram
    known = human[human["shown_first"].notna() & (human["label"] != "tie")]
    first = (known["label"] == known["shown_first"]).to_numpy(dtype=bool)
    return HumanBias(
        histogram=histogram,
        prefers_first=share(first, known["pair_id"].to_numpy(dtype=np.int64), "decisive vote"),
        judgments_with_order=int(human["shown_first"].notna().sum()),
    )


def _judge_bias(calls: pd.DataFrame, confidence: float, share: ShareFn) -> JudgeBias:
    """Position bias of one judge run from its calls: the histogram of shown scores, the share
    of decisive verdicts for the answer shown first, and the flip rate over the pairs judged in
    both orders (each order's first verdict on the pair, in the calls' order). Works on the codes
    of the order and label columns rather than on their text."""
    import pandas as pd

    order = pd.Categorical(calls["order"], categories=CALL_ORDERS).codes.astype(np.int64)
    label = pd.Categorical(calls["label"], categories=LABELS).codes.astype(np.int64)
    # "ab" (0) or "ba" (1): the calls that showed one answer first.
    one_order = (order == 0) | (order == 1)
    shown = calls["likert_shown"].to_numpy(dtype=np.float64)
    with_shown = one_order & ~np.isnan(shown)
    histogram = None
    if with_shown.any():
        histogram = position_bias(shown[with_shown].astype(int), confidence=confidence).histogram
    # Not a tie (a missing label counts, and never for the first answer); the first-shown answer
    # is A (code 0) in order "ab" (0) and B (1) in "ba" (1).
    decisive = one_order & (label != LABELS.index("tie"))
    pair_ids = calls["pair_id"].to_numpy(dtype=np.int64)
    first = (label == order)[decisive]
    # Each (pair, order)'s first labelled call, in the calls' order: a stable sort by pair and
    # order (a no-op on calls in calls_sort's order), then the first row of each run of keys.
    labelled = np.flatnonzero(one_order & (label >= 0))
    key = calls["pair_id"].to_numpy(dtype=np.int64)[labelled] * 2 + order[labelled]
    if len(key) > 1 and (key[1:] < key[:-1]).any():
        resorted = np.argsort(key, kind="stable")
        labelled, key = labelled[resorted], key[resorted]
    heads = np.ones(len(key), dtype=bool)
    heads[1:] = key[1:] != key[:-1]
    key, head_label = key[heads], label[labelled[heads]]
    # A pair judged in both orders has its "ab" key right before its "ba" key.
    both = (key[:-1] % 2 == 0) & (key[1:] == key[:-1] + 1)
    flips = None
    if both.any():
        names = np.array(LABELS)
        flipped = flips_of(names[head_label[:-1][both]], names[head_label[1:][both]])
        flips = share(flipped, key[:-1][both] // 2, "pair in both orders")
    return JudgeBias(
        histogram=histogram,
        prefers_first=share(first, pair_ids[decisive], "decisive call"),
        flip_rate=flips,
        calls_with_order=int(one_order.sum()),
    )


def _order_invariant(bias: JudgeBias, kind: str) -> JudgeBias:
    """A PL judge's calls are derived from two answer scores: no histogram, no share to show."""
    if kind != ORDER_INVARIANT_KIND:
        return bias
    return JudgeBias(
        histogram=None,
        prefers_first=bias.prefers_first,
        flip_rate=None,
        calls_with_order=bias.calls_with_order,
        order_invariant=True,
    )


class PositionBiasSection(Section[PositionBiasResult]):
    key = "position_bias"
    title = "Position bias"
    definition = (
        "Share of decisive votes for the answer shown first (an unbiased rater: about half), and "
        "how often a judge changes its verdict when the order is swapped."
    )
    result_type = PositionBiasResult
    reads = (INCONSISTENCY,)

    def compute(self, data: ReportData) -> PositionBiasResult:
        confidence = data.params.confidence
        marked = data.read(INCONSISTENCY).frame.set_index("run_id")
        judges = {}

        def share(
            hits: npt.NDArray[Any], pair_ids: npt.NDArray[np.int64], unit: str
        ) -> ClusterProportion:
            return share_over_prompts(data, hits, pair_ids, unit=unit)

        for s in data.votes.sources:
            bias = _order_invariant(
                _judge_bias(rows_of_run(data.votes.calls, s.run_id), confidence, share),
                s.judge_kind,
            )
            if s.run_id in marked.index:
                marked_share = wilson_interval(
                    int(marked["inconsistent"].loc[s.run_id]),
                    int(marked["labelled"].loc[s.run_id]),
                    confidence,
                )
                bias = dataclasses.replace(bias, inconsistent=marked_share)
            judges[s.name] = bias
        return PositionBiasResult(
            human=_human_bias(data.votes.human, confidence, share), judges=judges
        )

    def dump(self, result: PositionBiasResult) -> dict[str, Any]:
        return {self.key: {HUMAN: to_json(result.human), **to_json(result.judges)}}

    def load(self, payload: Mapping[str, Any]) -> PositionBiasResult:
        part = dict(payload[self.key])
        human = part.pop(HUMAN)
        return cast(
            PositionBiasResult, from_json(PositionBiasResult, {"human": human, "judges": part})
        )

    def _rows(self, result: PositionBiasResult, context: RenderContext) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            first = result.human.prefers_first if source == HUMAN else None
            flips = marked = None
            if source != HUMAN:
                judge = result.judges[source]
                first, flips, marked = judge.prefers_first, judge.flip_rate, judge.inconsistent
                if judge.order_invariant:
                    rows.append((source, ORDER_INVARIANT, *([None] * 8)))
                    continue
            assert first is not None
            rows.append(
                (
                    source,
                    first.share,
                    first.lower,
                    first.upper,
                    first.total,
                    flips.share if flips else None,
                    flips.total if flips else None,
                    marked.share if marked else None,
                    marked.total if marked else None,
                    first.resampled,
                )
            )
        return rows

    def tables(self, result: PositionBiasResult, context: RenderContext) -> list[Table]:
        histograms = [result.human.histogram, *(j.histogram for j in result.judges.values())]
        return [
            Table(
                "position-bias",
                "Position bias",
                (
                    "source",
                    "prefers first shown",
                    "lower",
                    "upper",
                    "decisive judgments with order",
                    "flip rate",
                    "pairs in both orders",
                    "marked inconsistent: share",
                    "imported verdicts",
                    "interval unit",
                ),
                tuple(self._rows(result, context)),
                note=" ".join(
                    part
                    for part in (
                        INTERVAL_NOTE,
                        "" if any(histograms) else NO_HISTOGRAM,
                        ORDER_INVARIANT_NOTE
                        if any(j.order_invariant for j in result.judges.values())
                        else "",
                    )
                    if part
                ),
            )
        ]

    def plots(self, result: PositionBiasResult, context: RenderContext) -> list[Plot]:
        plots = []
        for source in context.sources:
            histogram = (
                result.human.histogram if source == HUMAN else result.judges[source].histogram
            )
            if histogram:
                title = f"Shown scores 1-8: {source}"
                plots.append(
                    Plot(
                        f"position-bias-{slugify(source)}",
                        title,
                        histogram_svg(
                            title=title, counts={str(k): v for k, v in histogram.items()}
                        ),
                    )
                )
        return plots


SECTION = PositionBiasSection()
