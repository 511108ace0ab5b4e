"""Length bias: whether people and judges prefer the longer answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from leaderboard.plots import Series, bar_chart_svg
from leaderboard.report.base import (
    Plot,
    RenderContext,
    ReportData,
    Section,
    Table,
    correlation_over_prompts,
    prompt_clusters,
    share_over_prompts,
)
from leaderboard.selectors.section_reads import LENGTHS
from leaderboard.stats.bias import prefers_longer
from leaderboard.stats.bootstrap import ClusterProportion
from leaderboard.stats.correlation import Correlation
from leaderboard.stats.likert import preference_sign

if TYPE_CHECKING:
    import pandas as pd

NO_TEXTS = "no answer texts"
DEFINITION = (
    "Length of an answer: characters of its text at the judged turn. prefers_longer: among votes "
    "on pairs where both answers have text and differ in length, and that are not ties, the share "
    "naming the longer answer, with a bootstrap interval over prompts (every vote of a drawn "
    "prompt; interval unit: prompt). correlation_preference: Spearman between "
    "len(B) - len(A) and the vote (A = -1, tie = 0, B = +1), ties included; correlation_likert: "
    "Spearman between len(B) - len(A) and the canonical Likert score (8 = B much better); "
    "both with a bootstrap interval over prompts (Fisher's z past 20,000 votes). "
    "Positive means longer answers are preferred."
)
NO_TEXTS_NOTE = (
    "No answer texts: the answers in this selection have no text at the judged turn (imported "
    "labels only), so length bias cannot be measured."
)


@dataclass(frozen=True)
class SourceLength:
    votes: int
    ties: int
    prefers_longer: ClusterProportion
    correlation_preference: Correlation
    correlation_likert: Correlation


@dataclass(frozen=True)
class LengthBiasResult:
    has_answer_texts: bool
    status: str | None
    pairs_with_texts: int
    definition: str
    sources: dict[str, SourceLength | None]


def _source(data: ReportData, frame: pd.DataFrame, lengths: pd.DataFrame) -> SourceLength:
    merged = frame[["pair_id", "label", "likert"]].merge(
        lengths[["pair_id", "len_a", "len_b"]], on="pair_id", how="inner"
    )
    merged = merged[(merged["len_a"] > 0) & (merged["len_b"] > 0)]
    decisive, longer = prefers_longer(
        merged["len_a"].to_numpy(), merged["len_b"].to_numpy(), merged["label"]
    )
    pair_ids = merged["pair_id"].to_numpy(dtype=np.int64)
    prompts = prompt_clusters(data, pair_ids)
    diff = (merged["len_b"] - merged["len_a"]).to_numpy(dtype=np.float64)
    likert = np.asarray(merged["likert"].astype("float64"), dtype=np.float64)
    return SourceLength(
        votes=len(merged),
        ties=int((merged["label"] == "tie").sum()),
        prefers_longer=share_over_prompts(
            data, longer[decisive], pair_ids[decisive], unit="decisive vote"
        ),
        correlation_preference=correlation_over_prompts(
            data, diff, preference_sign(merged["label"]), prompts, "spearman"
        ),
        correlation_likert=correlation_over_prompts(data, diff, likert, prompts, "spearman"),
    )


def length_bias_compute(data: ReportData) -> LengthBiasResult:
    """Per source: share preferring the longer answer and correlation with the length gap."""
    lengths = data.read(LENGTHS).frame
    with_text = lengths[(lengths["len_a"] > 0) & (lengths["len_b"] > 0)]
    has_texts = not with_text.empty
    return LengthBiasResult(
        has_answer_texts=has_texts,
        status=None if has_texts else NO_TEXTS,
        pairs_with_texts=len(with_text),
        definition=DEFINITION,
        sources={
            name: _source(data, frame, with_text) if has_texts else None
            for name, frame in data.frames.items()
        },
    )


class LengthBiasSection(Section[LengthBiasResult]):
    key = "length_bias"
    title = "Length bias"
    definition = "Whether a source's decisive votes favour the longer of the two answers."
    result_type = LengthBiasResult
    reads = (LENGTHS,)

    def compute(self, data: ReportData) -> LengthBiasResult:
        return length_bias_compute(data)

    def tables(self, result: LengthBiasResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            entry = result.sources.get(source)
            if entry is None:
                rows.append((source, result.status or "no votes", *([None] * 7)))
                continue
            longer = entry.prefers_longer
            rows.append(
                (
                    source,
                    "",
                    longer.share,
                    longer.lower,
                    longer.upper,
                    longer.total,
                    entry.correlation_preference.estimate,
                    entry.correlation_likert.estimate,
                    longer.resampled,
                )
            )
        return [
            Table(
                "length-bias",
                "Length bias",
                (
                    "source",
                    "status",
                    "prefers longer: share",
                    "lower",
                    "upper",
                    "decisive votes with a length gap",
                    "spearman (vote vs length gap)",
                    "spearman (Likert vs length gap)",
                    "interval unit",
                ),
                tuple(rows),
                note=result.definition if result.has_answer_texts else NO_TEXTS_NOTE,
            )
        ]

    def plots(self, result: LengthBiasResult, context: RenderContext) -> list[Plot]:
        if not result.has_answer_texts:
            return []
        entries = [(s, result.sources.get(s)) for s in context.sources]
        shown = [(s, e) for s, e in entries if e is not None and e.prefers_longer.total]
        if not shown:
            return []
        title = "Share of decisive votes preferring the longer answer"
        return [
            Plot(
                "length-bias",
                title,
                bar_chart_svg(
                    title=title,
                    categories=[s for s, _ in shown],
                    series=[
                        Series(
                            name="prefers longer",
                            values=[e.prefers_longer.share for _, e in shown],
                            lower=[e.prefers_longer.lower for _, e in shown],
                            upper=[e.prefers_longer.upper for _, e in shown],
                        )
                    ],
                    y_label="share",
                    y_min=0.0,
                    y_max=1.0,
                ),
            )
        ]


SECTION = LengthBiasSection()
