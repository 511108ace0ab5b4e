"""Tables and plots of the report's later sections: length bias, rationales, the gold order and
win rates. A report stored before these sections existed simply shows none of them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.text import slugify

from leaderboard.plots import Series, bar_chart_svg, heatmap_svg
from leaderboard.presentation import Plot, Table

HUMAN = "human"
NO_TEXTS_NOTE = (
    "No answer texts: the answers in this selection have no text at the judged turn (imported "
    "labels only), so length bias cannot be measured."
)


def _sources(report: Mapping[str, Any]) -> list[str]:
    return [HUMAN, *sorted(report.get("judges", {}))]


def _length_table(report: Mapping[str, Any]) -> Table | None:
    section = report.get("length_bias")
    if section is None:
        return None
    rows: list[tuple[Any, ...]] = []
    for source in _sources(report):
        entry = section["sources"].get(source)
        if entry is None:
            rows.append((source, section["status"] or "no votes", *([None] * 6)))
            continue
        longer = entry["prefers_longer"]
        rows.append(
            (
                source,
                "",
                longer["share"],
                longer["lower"],
                longer["upper"],
                longer["total"],
                entry["correlation_preference"]["estimate"],
                entry["correlation_likert"]["estimate"],
            )
        )
    return Table(
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
        ),
        tuple(rows),
        note=section["definition"] if section["has_answer_texts"] else NO_TEXTS_NOTE,
    )


def _rationale_rows(scope: str, entry: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (scope, row["value"], entry["judgments"], row["count"], row["share"])
        for row in entry["values"]
    ]


def _rationale_table(report: Mapping[str, Any]) -> Table | None:
    section = report.get("rationale")
    if section is None:
        return None
    rows = _rationale_rows("overall", section["overall"])
    for entry in section["by_category"]:
        rows += _rationale_rows(f"category {entry['category']}", entry)
    for entry in section["judge_disagreement"]:
        scope = (
            f"people side with {entry['with']} against {entry['against']} ({entry['pairs']} pairs)"
        )
        rows += _rationale_rows(scope, entry)
    if not section["overall"]["judgments"]:
        rows = []
    return Table(
        "rationale",
        "Values cited for the better answer",
        ("scope", "value", "judgments", "count", "citing share"),
        tuple(rows),
        note=section["definition"],
    )


def _gold_order_tables(report: Mapping[str, Any]) -> list[Table]:
    section = report.get("gold_order")
    if section is None:
        return []
    rows: list[tuple[Any, ...]] = []
    for source in _sources(report):
        for kind in section["kinds"]:
            cell = section["accuracy"][source][kind]
            for level in ("votes", "majority"):
                if level not in cell:
                    continue
                acc = cell[level]
                rows.append(
                    (
                        source,
                        kind,
                        level,
                        acc["share"],
                        acc["lower"],
                        acc["upper"],
                        acc["total"],
                        acc["ties"],
                    )
                )
    ndcg_rows = []
    for source in _sources(report):
        entry = section["ndcg"]["sources"][source]
        ndcg_rows.append(
            (
                source,
                entry["ranking"],
                entry["prompts"],
                entry["at_1"],
                entry["at_3"],
                entry["at_all"],
            )
        )
    has_pairs = any(section["pairs"].values())
    return [
        Table(
            "gold-order-accuracy",
            "Accuracy against the gold order (first vs second, first vs last)",
            ("source", "pairs", "level", "accuracy", "lower", "upper", "judged", "ties"),
            tuple(rows) if has_pairs else (),
            note=section["definition"],
        ),
        Table(
            "ndcg",
            "NDCG of each source's ranking of a prompt's answers against the gold order",
            ("source", "ranking from", "prompts", "NDCG@1", "NDCG@3", "NDCG@all"),
            tuple(r for r in ndcg_rows if r[2]),
            note=section["ndcg"]["definition"],
        ),
    ]


def _win_rate_table(report: Mapping[str, Any]) -> Table | None:
    section = report.get("win_rates")
    if section is None:
        return None
    rows: list[tuple[Any, ...]] = []
    for source in _sources(report):
        entry = section["sources"][source]
        for i, model in enumerate(entry["models"]):
            for j, other in enumerate(entry["models"]):
                if i != j:
                    rows.append((source, model, other, entry["rates"][i][j]))
    return Table(
        "win-rates",
        "Win rates between models",
        ("source", "model", "against", "win rate"),
        tuple(rows),
        note=section["definition"],
    )


def section_tables(report: Mapping[str, Any]) -> list[Table]:
    """The later sections' tables, in the order shown."""
    tables = [
        _length_table(report),
        _rationale_table(report),
        *_gold_order_tables(report),
        _win_rate_table(report),
    ]
    return [t for t in tables if t is not None]


def _share_series(name: str, entry: Mapping[str, Any]) -> Series:
    return Series(name=name, values=[row["share"] for row in entry["values"]])


def section_plots(report: Mapping[str, Any]) -> list[Plot]:
    """The later sections' plots, in the order shown."""
    plots: list[Plot] = []
    length = report.get("length_bias")
    if length and length["has_answer_texts"]:
        entries = [(s, length["sources"].get(s)) for s in _sources(report)]
        entries = [(s, e) for s, e in entries if e and e["prefers_longer"]["total"]]
        if entries:
            title = "Share of decisive votes preferring the longer answer"
            plots.append(
                Plot(
                    "length-bias",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=[s for s, _ in entries],
                        series=[
                            Series(
                                name="prefers longer",
                                values=[e["prefers_longer"]["share"] for _, e in entries],
                                lower=[e["prefers_longer"]["lower"] for _, e in entries],
                                upper=[e["prefers_longer"]["upper"] for _, e in entries],
                            )
                        ],
                        y_label="share",
                        y_min=0.0,
                        y_max=1.0,
                    ),
                )
            )
    rationale = report.get("rationale")
    if rationale and rationale["overall"]["judgments"]:
        keys = rationale["value_keys"]
        series = [_share_series("overall", rationale["overall"])]
        series += [
            _share_series(f"with {e['with']} vs {e['against']}", e)
            for e in rationale["judge_disagreement"]
            if e["judgments"]
        ]
        title = "Values cited for the better answer (share of judgments)"
        plots.append(
            Plot(
                "rationale",
                title,
                bar_chart_svg(
                    title=title, categories=keys, series=series, y_label="share", y_min=0.0
                ),
            )
        )
        if len(rationale["by_category"]) > 1:
            title = "Values cited by category (share of judgments)"
            plots.append(
                Plot(
                    "rationale-by-category",
                    title,
                    bar_chart_svg(
                        title=title,
                        categories=keys,
                        series=[_share_series(e["category"], e) for e in rationale["by_category"]],
                        y_label="share",
                        y_min=0.0,
                    ),
                )
            )
    gold = report.get("gold_order")
    if gold and any(gold["pairs"].values()):
        title = "Accuracy against the gold order (votes)"
        plots.append(
            Plot(
                "gold-order-accuracy",
                title,
                bar_chart_svg(
                    title=title,
                    categories=gold["kinds"],
                    series=[
                        Series(
                            name=source,
                            values=[
                                gold["accuracy"][source][k]["votes"]["share"] for k in gold["kinds"]
                            ],
                            lower=[
                                gold["accuracy"][source][k]["votes"]["lower"] for k in gold["kinds"]
                            ],
                            upper=[
                                gold["accuracy"][source][k]["votes"]["upper"] for k in gold["kinds"]
                            ],
                        )
                        for source in _sources(report)
                    ],
                    y_label="accuracy",
                    y_min=0.0,
                    y_max=1.0,
                ),
            )
        )
    wins = report.get("win_rates")
    if wins:
        for source in _sources(report):
            entry = wins["sources"][source]
            if not entry["models"]:
                continue
            title = f"Win rates: {source}"
            plots.append(
                Plot(
                    f"win-rate-{slugify(source)}",
                    title,
                    heatmap_svg(
                        title=title,
                        rows=entry["models"],
                        columns=entry["models"],
                        values=entry["rates"],
                    ),
                )
            )
    return plots
