"""Wide report tables as the page shows them (Table.page): intervals in one cell, few-row tables
turned, column groups kept; the CSV keeps every column."""

from __future__ import annotations

from leaderboard.report.base import PAGE_WIDE_COLUMNS, Table
from leaderboard.report.cells import IntervalCell
from leaderboard.report.document import table_to_csv
from leaderboard.templatetags.analysis import cell


def test_a_narrow_table_shows_as_it_is() -> None:
    table = Table("t", "T", ("a", "a_lower", "a_upper"), ((0.5, 0.4, 0.6),))
    view = table.page()
    assert view.columns == table.columns and view.cells == table.cells()


def test_a_wide_table_of_few_rows_merges_its_intervals_and_turns() -> None:
    extras = tuple(f"extra_{i}" for i in range(PAGE_WIDE_COLUMNS))
    columns = ("source", "kind", "c_res", "c_res_lower", "c_res_upper", "swap_invariance",
               "swap_lower", "swap_upper", *extras)  # fmt: skip
    rows = (
        ("human", "people", 0.8, 0.7, 0.9, None, None, None, *range(PAGE_WIDE_COLUMNS)),
        ("judge", "score", 0.6, 0.5, 0.7, 0.95, 0.9, 0.99, *range(PAGE_WIDE_COLUMNS)),
    )
    table = Table("consistency", "C", columns, rows)
    view = table.page()
    assert view.columns == ("measure", "human", "judge")
    by_measure = {row[0][0]: row[1:] for row in view.cells}
    assert list(by_measure)[:3] == ["kind", "c res [interval]", "swap invariance [interval]"]
    human, judge = by_measure["c res [interval]"]
    assert human == (IntervalCell(0.8, 0.7, 0.9), "c_res")
    assert cell(*judge) == "0.600 [0.500, 0.700]"
    assert cell(*by_measure["swap invariance [interval]"][0]) == "–"
    assert len(view.cells) == len(columns) - 1 - 4  # two intervals folded, the source on top
    assert table_to_csv(table).decode().splitlines()[0].split(",") == list(columns)


def test_a_wide_grouped_table_keeps_its_groups_with_the_intervals_folded() -> None:
    sources = [f"judge {i}" for i in range(5)]
    columns = (
        "model",
        *(f"{s}: {c}" for s in sources for c in ("rating", "lower", "upper", "rank")),
    )
    row = ("m1", *(v for _ in sources for v in (1000.0, 990.0, 1010.0, 1)))
    table = Table("leaderboard-bt", "BT", columns, (row,) * 12,
                  groups=(("", 1), *((s, 4) for s in sources)))  # fmt: skip
    view = table.page()
    assert view.groups == (("", 1), *((s, 2) for s in sources))
    assert view.columns[:3] == ("model", "judge 0: rating [interval]", "judge 0: rank")
    assert len(view.cells) == 12 and len(view.cells[0]) == 11
    assert cell(*view.cells[0][1]) == "1000.000 [990.000, 1010.000]"
