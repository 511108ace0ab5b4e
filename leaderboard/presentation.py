"""Turn an agreement report (the JSON dict) into the tables and plots the analysis page shows.

Each table has a stable name, used in its CSV export URL; each plot has a stable name, used in
its SVG download URL. Cells hold raw values; the page formats them, the CSV writes them as is.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.text import slugify

from leaderboard.plots import Series, bar_chart_svg, histogram_svg

HUMAN = "human"


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""

    def cells(self) -> list[list[tuple[Any, str]]]:
        """Rows of (value, column name) pairs, for formatting by column."""
        return [list(zip(row, self.columns, strict=True)) for row in self.rows]


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    svg: str
    note: str = ""


def _cell(count: Mapping[str, Any] | None) -> tuple[Any, Any, Any]:
    if not count:
        return (None, None, None)
    return (count.get("rate"), count.get("agree"), count.get("total"))


def _agreement_rows(report: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    hh = report["human_vs_human"]
    rows.append(("human vs human", "vote", *_cell(hh["with_ties"]), *_cell(hh["without_ties"])))
    for name in sorted(report["judges"]):
        vs = report["judges"][name]["vs_human"]
        rows.append(
            (f"{name} vs human", "vote", *_cell(vs["with_ties"]), *_cell(vs["without_ties"]))
        )
        if vs.get("majority"):
            majority = vs["majority"]
            rows.append(
                (
                    f"{name} vs human",
                    "majority",
                    *_cell(majority["with_ties"]),
                    *_cell(majority["without_ties"]),
                )
            )
    for pair in report["judge_vs_judge"]:
        rows.append(
            (
                f"{pair['a']} vs {pair['b']}",
                "vote",
                *_cell(pair["with_ties"]),
                *_cell(pair["without_ties"]),
            )
        )
    return rows


def _reliability_rows(report: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    hh = report["human_vs_human"]
    fleiss = hh["fleiss_kappa"]
    alpha = hh["krippendorff_alpha"]
    rows: list[tuple[Any, ...]] = [
        (
            "human vs human",
            "Fleiss' kappa",
            fleiss["kappa"],
            f"{fleiss['units']} units with {fleiss['votes_per_unit']} votes",
        ),
        (
            "human vs human",
            "Krippendorff's alpha (nominal, preference)",
            alpha["nominal_preference"],
            "",
        ),
        ("human vs human", "Krippendorff's alpha (ordinal, Likert)", alpha["ordinal_likert"], ""),
    ]
    for name in sorted(report["judges"]):
        vs = report["judges"][name]["vs_human"]
        cohen = vs["cohen_kappa_vs_majority"]
        weighted = vs["weighted_kappa_likert"]
        rows.append(
            (
                f"{name} vs human",
                "Cohen's kappa vs majority",
                cohen["kappa"],
                f"{cohen['units']} units",
            )
        )
        rows.append(
            (
                f"{name} vs human",
                "weighted kappa (quadratic, Likert)",
                weighted["kappa"],
                f"{weighted['pairs']} vote pairs",
            )
        )
    return rows


def _category_rows(report: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for entry in report["per_category"]["categories"]:
        for judge in sorted(entry["judges"]):
            pearson = entry["judges"][judge]["pearson"]
            spearman = entry["judges"][judge]["spearman"]
            rows.append(
                (
                    entry["category"],
                    judge,
                    pearson["estimate"],
                    pearson["lower"],
                    pearson["upper"],
                    spearman["estimate"],
                    pearson["n"],
                )
            )
    return rows


def _bias_rows(report: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for source in _sources(report):
        bias = report["position_bias"][source]
        first = bias["prefers_first"]
        flips = bias.get("flip_rate")
        rows.append(
            (
                source,
                first["share"],
                first["lower"],
                first["upper"],
                first["total"],
                flips["share"] if flips else None,
                flips["total"] if flips else None,
            )
        )
    return rows


def _gold_rows(report: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    gold = report["gold"]
    for source in _sources(report):
        for kind in gold["kinds"]:
            cell = gold["sources"][source][kind]
            accuracy = cell["accuracy"]
            rows.append(
                (
                    source,
                    kind,
                    accuracy["share"],
                    accuracy["lower"],
                    accuracy["upper"],
                    accuracy["total"],
                    cell["ties"],
                )
            )
    return rows


def _sources(report: Mapping[str, Any]) -> list[str]:
    return [HUMAN, *sorted(report["judges"])]


def _leaderboard_rows(report: Mapping[str, Any], kind: str) -> list[tuple[Any, ...]]:
    boards = report["leaderboards"]["sources"]
    rows: list[tuple[Any, ...]] = []
    for source in _sources(report):
        for rank, row in enumerate(boards[source][kind], start=1):
            rows.append((source, rank, row["model"], row["rating"], row["lower"], row["upper"]))
    return rows


def report_tables(report: Mapping[str, Any]) -> list[Table]:
    """The page's tables, in the order shown."""
    rank_rows = [
        (r["a"], r["b"], r["spearman"]["estimate"], r["kendall"]["estimate"], len(r["models"]))
        for r in report["leaderboards"]["rank_correlation"]
    ]
    leaderboard_columns = ("source", "rank", "model", "rating", "lower", "upper")
    return [
        Table(
            "agreement",
            "Agreement",
            (
                "comparison",
                "level",
                "with ties: rate",
                "with ties: agree",
                "with ties: total",
                "without ties: rate",
                "without ties: agree",
                "without ties: total",
            ),
            tuple(_agreement_rows(report)),
            note=report["metadata"]["definition"],
        ),
        Table(
            "reliability",
            "Chance-corrected agreement",
            ("comparison", "statistic", "value", "computed on"),
            tuple(_reliability_rows(report)),
        ),
        Table(
            "category-correlation",
            "Correlation with people per category",
            ("category", "judge", "pearson r", "lower", "upper", "spearman rho", "units"),
            tuple(_category_rows(report)),
            note=report["per_category"]["definition"],
        ),
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
            ),
            tuple(_bias_rows(report)),
        ),
        Table(
            "gold-accuracy",
            "Accuracy on gold pairs (ties count as wrong)",
            ("source", "gold kind", "accuracy", "lower", "upper", "votes", "ties"),
            tuple(_gold_rows(report)),
        ),
        Table(
            "elo-with-ties",
            "Elo (bootstrap median, 95% interval), ties as half a win",
            leaderboard_columns,
            tuple(_leaderboard_rows(report, "elo_with_ties")),
        ),
        Table(
            "elo-without-ties",
            "Elo (bootstrap median, 95% interval), ties left out",
            leaderboard_columns,
            tuple(_leaderboard_rows(report, "elo_without_ties")),
        ),
        Table(
            "bradley-terry",
            "Bradley-Terry (Elo scale, bootstrap 95% interval)",
            leaderboard_columns,
            tuple(_leaderboard_rows(report, "bradley_terry")),
        ),
        Table(
            "rank-correlation",
            "Rank correlation between leaderboards (Bradley-Terry ratings)",
            ("a", "b", "spearman rho", "kendall tau", "models"),
            tuple(rank_rows),
        ),
        *_later_tables(report),
    ]


def _later_tables(report: Mapping[str, Any]) -> list[Table]:
    from leaderboard.presentation_sections import section_tables  # imports Table from here

    return section_tables(report)


def _later_plots(report: Mapping[str, Any]) -> list[Plot]:
    from leaderboard.presentation_sections import section_plots  # imports Plot from here

    return section_plots(report)


def report_table(report: Mapping[str, Any], name: str) -> Table | None:
    """The table of that name, or None."""
    return next((t for t in report_tables(report) if t.name == name), None)


def table_to_csv(table: Table) -> bytes:
    """The table as CSV bytes with a header row; empty cells for missing values."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow(["" if v is None else v for v in row])
    return out.getvalue().encode("utf-8")


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    return [r[key] for r in rows]


def report_plots(report: Mapping[str, Any]) -> list[Plot]:
    """The page's plots, in the order shown."""
    plots: list[Plot] = []
    categories = report["per_category"]["categories"]
    judges = sorted(report["judges"])
    if categories and judges:
        series = [
            Series(
                name=judge,
                values=[c["judges"][judge]["pearson"]["estimate"] for c in categories],
                lower=[c["judges"][judge]["pearson"]["lower"] for c in categories],
                upper=[c["judges"][judge]["pearson"]["upper"] for c in categories],
            )
            for judge in judges
        ]
        plots.append(
            Plot(
                "category-correlation",
                "Correlation with people per category (Pearson r)",
                bar_chart_svg(
                    title="Correlation with people per category (Pearson r)",
                    categories=[c["category"] for c in categories],
                    series=series,
                    y_label="Pearson r",
                    y_min=-1.0,
                    y_max=1.0,
                ),
            )
        )
    for source in _sources(report):
        histogram = report["position_bias"][source]["histogram"]
        title = f"Shown scores 1-8: {source}"
        if histogram:
            plots.append(
                Plot(
                    f"position-bias-{slugify(source)}",
                    title,
                    histogram_svg(title=title, counts=histogram),
                )
            )
    boards = report["leaderboards"]["sources"]
    for source in _sources(report):
        rows = boards[source]["elo_with_ties"]
        if not rows:
            continue
        title = f"Elo with ties: {source}"
        ratings = [r["rating"] for r in rows]
        lows = [r["lower"] for r in rows if r["lower"] is not None]
        highs = [r["upper"] for r in rows if r["upper"] is not None]
        plots.append(
            Plot(
                f"elo-{slugify(source)}",
                title,
                bar_chart_svg(
                    title=title,
                    categories=[r["model"] for r in rows],
                    series=[
                        Series(
                            name=source,
                            values=ratings,
                            lower=_values(rows, "lower"),
                            upper=_values(rows, "upper"),
                        )
                    ],
                    y_label="rating",
                    y_min=min([*ratings, *lows]) - 50,
                    y_max=max([*ratings, *highs]) + 50,
                ),
            )
        )
    return plots + _later_plots(report)


def report_plot(report: Mapping[str, Any], name: str) -> Plot | None:
    """The plot of that name, or None."""
    return next((p for p in report_plots(report) if p.name == name), None)
