"""Win rates: the share of battles each model won against each other model, per source."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.utils.text import slugify

from leaderboard.plots import heatmap_svg
from leaderboard.report.base import Plot, RenderContext, ReportData, Section, Table
from leaderboard.stats.win_rates import win_rates_from_votes

DEFINITION = "row model's wins over column model / their battles; a tie is half a win"


@dataclass(frozen=True)
class WinRates:
    battles: int
    models: list[str]
    rates: list[list[float | None]]


@dataclass(frozen=True)
class WinRatesResult:
    definition: str
    sources: dict[str, WinRates]


def win_rates_compute(data: ReportData) -> WinRatesResult:
    """Per source, the share of battles each model won against each other (ties as half)."""
    out = {}
    for name, frame in data.frames.items():
        models, rates, battles = win_rates_from_votes(frame)
        out[name] = WinRates(
            battles, models, [[None if math.isnan(v) else float(v) for v in row] for row in rates]
        )
    return WinRatesResult(DEFINITION, out)


class WinRatesSection(Section[WinRatesResult]):
    key = "win_rates"
    title = "Win rates between models"
    definition = "How often the row model beat the column model in one source's votes."
    result_type = WinRatesResult

    def compute(self, data: ReportData) -> WinRatesResult:
        return win_rates_compute(data)

    def tables(self, result: WinRatesResult, context: RenderContext) -> list[Table]:
        rows: list[tuple[Any, ...]] = []
        for source in context.sources:
            entry = result.sources[source]
            for i, model in enumerate(entry.models):
                for j, other in enumerate(entry.models):
                    if i != j:
                        rows.append((source, model, other, entry.rates[i][j]))
        return [
            Table(
                "win-rates",
                "Win rates between models",
                ("source", "model", "against", "win rate"),
                tuple(rows),
                note=result.definition,
            )
        ]

    def plots(self, result: WinRatesResult, context: RenderContext) -> list[Plot]:
        plots = []
        for source in context.sources:
            entry = result.sources[source]
            if not entry.models:
                continue
            title = f"Win rates: {source}"
            plots.append(
                Plot(
                    f"win-rate-{slugify(source)}",
                    title,
                    heatmap_svg(
                        title=title, rows=entry.models, columns=entry.models, values=entry.rates
                    ),
                )
            )
        return plots


SECTION = WinRatesSection()
