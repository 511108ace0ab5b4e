"""Accuracy on gold pairs: how often each source names the known better side of a gold pair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaderboard.report.base import RenderContext, ReportData, Section, Table
from leaderboard.stats.proportion import Proportion, wilson_interval


@dataclass(frozen=True)
class GoldCell:
    accuracy: Proportion
    ties: int


@dataclass(frozen=True)
class GoldResult:
    kinds: list[str]
    sources: dict[str, dict[str, GoldCell]]


def gold_compute(data: ReportData) -> GoldResult:
    """Accuracy on gold pairs (the known better side), per gold kind, for people and each judge.

    A vote is correct when it names the gold side; a tie is never correct and is counted apart
    (AdvisorQA's first-vs-second and first-vs-last accuracy)."""
    pairs = data.votes.pairs.set_index("pair_id")
    gold_side, gold_kind = pairs["gold_side"], pairs["gold_kind"]
    kinds = sorted(k for k in set(data.votes.pairs["gold_kind"].tolist()) if k)
    confidence = data.params.confidence
    out: dict[str, dict[str, GoldCell]] = {}
    for source, frame in data.frames.items():
        on_gold = frame[frame["is_gold"]]
        side = gold_side.reindex(on_gold["pair_id"]).to_numpy()
        kind = gold_kind.reindex(on_gold["pair_id"]).to_numpy()
        labels = on_gold["label"].to_numpy()
        out[source] = {}
        for k in kinds:
            mine = kind == k
            correct = int((labels[mine] == side[mine]).sum())
            out[source][k] = GoldCell(
                wilson_interval(correct, int(mine.sum()), confidence),
                int((labels[mine] == "tie").sum()),
            )
    return GoldResult(kinds, out)


class GoldSection(Section[GoldResult]):
    key = "gold"
    title = "Accuracy on gold pairs"
    definition = (
        "Share of votes on gold pairs that name the known better side; a tie is never correct."
    )
    result_type = GoldResult

    def compute(self, data: ReportData) -> GoldResult:
        return gold_compute(data)

    def tables(self, result: GoldResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            for kind in result.kinds:
                cell = result.sources[source][kind]
                accuracy = cell.accuracy
                rows.append(
                    (
                        source,
                        kind,
                        accuracy.share,
                        accuracy.lower,
                        accuracy.upper,
                        accuracy.total,
                        cell.ties,
                    )
                )
        return [
            Table(
                "gold-accuracy",
                "Accuracy on gold pairs (ties count as wrong)",
                ("source", "gold kind", "accuracy", "lower", "upper", "votes", "ties"),
                tuple(rows),
            )
        ]


SECTION = GoldSection()
