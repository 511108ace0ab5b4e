"""The plots size their margins to their labels: every label lies inside the SVG's viewBox.

Checked twice: by the plots' own measure of text (an over-estimate of Helvetica's widths) on the
SVG's geometry, and in a real headless Chromium, which lays the text out with the fonts it has
and reports each label's box.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from leaderboard.plots import Series, bar_chart_svg, heatmap_svg, text_width
from tests.browser import chromium

SVG = "{http://www.w3.org/2000/svg}"
SEVEN_VALUES = [
    "relevance",
    "actionability and practicality",
    "empathy and sensitivity",
    "creativity",
    "readability and clarity",
    "constructiveness",
    "ethics",
]
LONG = "claude-instant-v1.2 (temperature 0.7, long system prompt)"


def values_by_category() -> str:
    """The seven values by category, as the rationale section draws it (its legend was cut)."""
    categories = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem"]
    return bar_chart_svg(
        title="Values cited, by category",
        categories=categories,
        series=[Series(name=v, values=[0.1 * (i + 1)] * 7) for i, v in enumerate(SEVEN_VALUES)],
        y_label="share of judgments",
        y_min=0.0,
        y_max=1.0,
    )


def long_category_labels() -> str:
    return bar_chart_svg(
        title="Elo with ties: human",
        categories=[LONG, "gpt-4", "alpaca-13b", "a model with a rather long name indeed"],
        series=[Series(name="human", values=[1100.0, 1050.0, 980.0, 900.0])],
        y_label="rating",
        y_min=850.0,
        y_max=1150.0,
    )


def long_heatmap_label() -> str:
    models = [LONG, "gpt-4", "llama-13b"]
    return heatmap_svg(
        title="Win rates: human",
        rows=models,
        columns=models,
        values=[[None, 0.6, 0.7], [0.4, None, 0.55], [0.3, 0.45, None]],
    )


PLOTS = {
    "seven values by category": values_by_category,
    "long category labels": long_category_labels,
    "long heatmap label": long_heatmap_label,
}


def view_box(root: ET.Element) -> tuple[float, float]:
    _, _, width, height = (float(v) for v in root.attrib["viewBox"].split())
    return width, height


def text_box(element: ET.Element) -> tuple[float, float, float, float]:
    """The corners' extent (x0, y0, x1, y1) of a text element: its measured width along the
    baseline from its anchor, a font size above and a third below, then its rotation."""
    size = float(element.attrib.get("font-size", 11))
    x, y = float(element.attrib["x"]), float(element.attrib["y"])
    width = text_width(element.text or "", size)
    start = {"start": 0.0, "middle": -width / 2, "end": -width}[
        element.attrib.get("text-anchor", "start")
    ]
    corners = [(x + dx, y + dy) for dx in (start, start + width) for dy in (-size, size / 3)]
    rotation = re.match(
        r"rotate\((-?[\d.]+) ([\d.]+) ([\d.]+)\)", element.attrib.get("transform", "")
    )
    if rotation:
        angle, cx, cy = (float(v) for v in rotation.groups())
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        corners = [
            (cx + (px - cx) * cos - (py - cy) * sin, cy + (px - cx) * sin + (py - cy) * cos)
            for px, py in corners
        ]
    xs, ys = [p[0] for p in corners], [p[1] for p in corners]
    return min(xs), min(ys), max(xs), max(ys)


@pytest.mark.parametrize("name", list(PLOTS))
def test_every_label_lies_inside_the_view_box_by_the_plots_measure(name: str) -> None:
    root = ET.fromstring(PLOTS[name]())
    width, height = view_box(root)

    texts = list(root.iter(f"{SVG}text"))

    longest = "actionability and practicality" if name == "seven values by category" else LONG
    assert longest in {t.text for t in texts}  # whole, not cut short
    for element in texts:
        x0, y0, x1, y1 = text_box(element)
        assert x0 >= 0 and y0 >= 0 and x1 <= width and y1 <= height, (element.text, width)


def test_the_legend_wraps_instead_of_running_off_the_plot() -> None:
    root = ET.fromstring(values_by_category())
    width, _ = view_box(root)
    legend = [t for t in root.iter(f"{SVG}text") if t.text in SEVEN_VALUES]

    assert [t.text for t in legend] == SEVEN_VALUES  # whole names, none cut short
    assert len({t.attrib["y"] for t in legend}) >= 2  # on more than one line
    assert width == 720  # the plot keeps its width; the legend wraps below it


def test_every_label_lies_inside_the_svg_as_chromium_draws_it(db: None) -> None:
    script = """() => {
        const svg = document.querySelector('svg').getBoundingClientRect();
        return [...document.querySelectorAll('text')].map(t => {
            const r = t.getBoundingClientRect();
            return [t.textContent, r.left - svg.left, r.top - svg.top,
                    svg.right - r.right, svg.bottom - r.bottom];
        });
    }"""
    with chromium() as browser:
        page = browser.new_page()
        for name, draw in PLOTS.items():
            page.set_content(f"<!doctype html><body style='margin:0'>{draw()}</body>")
            boxes = page.evaluate(script)
            assert boxes, name
            for text, left, top, right, bottom in boxes:
                assert min(left, top, right, bottom) >= 0, (name, text, left, top, right, bottom)


@pytest.mark.parametrize("count", [10, 20])
def test_every_series_of_a_bar_chart_has_its_own_look_in_bars_and_legend(count: int) -> None:
    """The values-cited plot has 10 series: with an 8-colour cycle two pairs of them looked the
    same. Each series' paint (fill, outline) is its own, and its bars wear its legend's paint."""
    names = [f"series {i}" for i in range(count)]
    svg = bar_chart_svg(
        title="Many series",
        categories=["a", "b"],
        series=[Series(name=n, values=[0.1 + i / 100, 0.2]) for i, n in enumerate(names)],
        y_label="share",
    )
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}

    def paint(rect: ET.Element) -> tuple[str | None, ...]:
        return tuple(rect.get(a) for a in ("fill", "stroke", "stroke-dasharray"))

    bars: dict[str, set[tuple[str | None, ...]]] = {}
    for rect in root.iterfind("s:rect", ns):
        title = rect.find("s:title", ns)
        if title is not None and title.text:
            bars.setdefault(title.text.split(",")[0], set()).add(paint(rect))
    swatches = [r for r in root.iterfind("s:rect", ns) if r.get("width") == "10"]
    assert len(swatches) == count
    looks = [paint(r) for r in swatches]
    assert len(set(looks)) == count
    for name, look in zip(names, looks, strict=True):
        assert bars[name] == {look}
