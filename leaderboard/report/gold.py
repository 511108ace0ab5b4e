"""Accuracy on gold pairs: how often each source names the known better side of a gold pair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from leaderboard.report.base import RenderContext, ReportData, Section, Table, share_over_prompts
from leaderboard.stats.bootstrap import ClusterProportion


@dataclass(frozen=True)
class Accuracy(ClusterProportion):
    """Votes (or majorities) on one kind of gold pair. The share is the strict accuracy,
    ``count`` correct of ``total`` (a tie is wrong: the documented key since version 1), with
    its interval over prompts; ``ties`` are the ties; ``ties_half`` is the accuracy with a tie
    half correct, (count + ties / 2) / total (AdvisorQA's rule, as ``advisorqa_table3``
    counts), with its own interval. Both are shown, labelled."""

    ties: int = 0
    ties_half: ClusterProportion | None = None


def accuracy_of(
    data: ReportData,
    labels: npt.NDArray[Any],
    sides: npt.NDArray[Any],
    pair_ids: npt.NDArray[Any],
    unit: str,
) -> Accuracy:
    """The accuracy of ``labels`` ("A", "B", "tie") against the better ``sides``, one per unit on
    the pair ``pair_ids``, under both tie rules, each with the report's interval over prompts."""
    correct = np.asarray(labels == sides, dtype=bool)
    tie = np.asarray(labels == "tie", dtype=bool)
    strict = share_over_prompts(data, correct, pair_ids, unit=unit)
    return Accuracy(
        **vars(strict),
        ties=int(tie.sum()),
        ties_half=share_over_prompts(data, correct + 0.5 * tie, pair_ids, unit=unit),
    )


ACCURACY_COLUMNS = (
    "strict accuracy (tie = wrong)",
    "lower",
    "upper",
    "accuracy (tie = half)",
    "half lower",
    "half upper",
    "votes",
    "ties",
    "interval unit",
)


def accuracy_cells(acc: Accuracy) -> tuple[Any, ...]:
    """A table row's cells for ACCURACY_COLUMNS."""
    half = acc.ties_half
    return (
        acc.share,
        acc.lower,
        acc.upper,
        half.share if half else None,
        half.lower if half else None,
        half.upper if half else None,
        acc.total,
        acc.ties,
        acc.resampled,
    )


@dataclass(frozen=True)
class GoldCell:
    accuracy: Accuracy
    ties: int


@dataclass(frozen=True)
class GoldResult:
    kinds: list[str]
    sources: dict[str, dict[str, GoldCell]]


def gold_compute(data: ReportData) -> GoldResult:
    """Accuracy on gold pairs (the known better side), per gold kind, for people and each judge.

    A vote is correct when it names the gold side. ``accuracy`` counts a tie as wrong (strict),
    ``accuracy.ties_half`` as half correct (AdvisorQA's rule for its first-vs-second and
    first-vs-last accuracy); both are shown, with intervals over prompts."""
    pairs = data.votes.pairs.set_index("pair_id")
    gold_side, gold_kind = pairs["gold_side"], pairs["gold_kind"]
    kinds = sorted(k for k in set(data.votes.pairs["gold_kind"].tolist()) if k)
    out: dict[str, dict[str, GoldCell]] = {}
    for source, frame in data.frames.items():
        on_gold = frame[frame["is_gold"]]
        side = gold_side.reindex(on_gold["pair_id"]).to_numpy()
        kind = gold_kind.reindex(on_gold["pair_id"]).to_numpy()
        labels = on_gold["label"].to_numpy(dtype=object)
        pair_ids = on_gold["pair_id"].to_numpy(dtype=np.int64)
        out[source] = {}
        for k in kinds:
            mine = kind == k
            cell = accuracy_of(data, labels[mine], side[mine], pair_ids[mine], "vote")
            out[source][k] = GoldCell(cell, cell.ties)
    return GoldResult(kinds, out)


class GoldSection(Section[GoldResult]):
    key = "gold"
    title = "Accuracy on gold pairs"
    definition = (
        "Share of votes on gold pairs that name the known better side: a tie counts as wrong "
        "(strict accuracy) and, beside it, as half correct (AdvisorQA's rule)."
    )
    result_type = GoldResult

    def compute(self, data: ReportData) -> GoldResult:
        return gold_compute(data)

    def tables(self, result: GoldResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            for kind in result.kinds:
                cell = result.sources[source][kind]
                rows.append((source, kind, *accuracy_cells(cell.accuracy)))
        return [
            Table(
                "gold-accuracy",
                "Accuracy on gold pairs (strict: a tie wrong; and a tie half correct)",
                ("source", "gold kind", *ACCURACY_COLUMNS),
                tuple(rows),
                note=(
                    "Intervals: a bootstrap over prompts (every vote of a drawn prompt; interval "
                    "unit: prompt)."
                ),
            )
        ]


SECTION = GoldSection()
