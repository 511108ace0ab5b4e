"""Win rates: the share of battles each model won against each other model, per source."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from django.utils.text import slugify

from leaderboard.plots import heatmap_svg
from leaderboard.report.base import Plot, RenderContext, ReportData, Section, Table

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


def win_rates_from_votes(frame: pd.DataFrame) -> tuple[list[str], npt.NDArray[np.float64], int]:
    """Models, win-rate matrix and battle count of one source's votes.

    The same formula as :func:`leaderboard.stats.ratings.win_rate_matrix` with ties="half"
    (``W_ij / (W_ij + W_ji)``, a tie half a win each, NaN where two models never met and on the
    diagonal), summed from the counts per (model A, model B, label), so a million votes cost one
    group-by instead of a Python step per battle. Votes of a model against itself are left out.
    """
    kept = frame[frame["system_a"] != frame["system_b"]]
    counts = kept.groupby(["system_a", "system_b", "label"], observed=True).size()
    models = sorted({str(m) for key in counts.index for m in key[:2]})
    index = {m: i for i, m in enumerate(models)}
    wins = np.zeros((len(models), len(models)))
    for (a, b, label), n in counts.items():
        i, j = index[str(a)], index[str(b)]
        if label == "A":
            wins[i, j] += n
        elif label == "B":
            wins[j, i] += n
        else:
            wins[i, j] += n / 2
            wins[j, i] += n / 2
    games = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(games > 0, wins / games, np.nan)
    return models, rates, len(kept)


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
