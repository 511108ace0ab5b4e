"""Plots as standalone SVG text, drawn on the server: no scripts, no external assets, no inline
styles (presentation attributes only), so the pages work under a strict Content-Security-Policy
and every plot can be downloaded as the same file the page shows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = (
    "#3b6ea8", "#d9822b", "#4a9a5b", "#b8474d", "#7a5ea8", "#8c6d4f",
    "#c36bb0", "#6b7b8c", "#b5a33a", "#2aa5b4", "#1f3f6e", "#e5a3a8",
)  # fmt: skip


def series_paint(index: int) -> str:
    """The fill of series ``index`` (bars and legend swatch), as SVG attributes: the palette's
    colours first, then the same colours with a dashed dark outline, so up to twice the
    palette's length series never share a look."""
    colour = PALETTE[index % len(PALETTE)]
    if (index // len(PALETTE)) % 2 == 0:
        return f'fill="{colour}"'
    return f'fill="{colour}" stroke="#111111" stroke-width="1.5" stroke-dasharray="3 2"'


WIDTH = 720
PLOT_HEIGHT = 220
MARGIN_RIGHT, MARGIN_TOP = 16, 36
FONT_SIZE = 11
# Advance widths of Helvetica / Arial in thousandths of an em (Adobe's core font metrics), for
# the characters labels use; any other character counts as an em. Text is measured with them,
# times _WIDER, since the sans-serif a browser picks (DejaVu Sans on many Linux machines) runs up
# to about 12% wider than Arial.
_ADVANCE = {
    **dict.fromkeys(" !,./:;I[]ijlt|'", 278),
    **dict.fromkeys("()-`fr{}", 333),
    **dict.fromkeys('"*^', 389),
    **dict.fromkeys("+<=>~", 584),
    **dict.fromkeys("0123456789#$?_abcdeghnopqsuLTZFkvxyz", 556),
    **dict.fromkeys("JS", 500),
    **dict.fromkeys("ABEKPVXY&", 667),
    **dict.fromkeys("CDHNRUw", 722),
    **dict.fromkeys("GOQ", 778),
    **dict.fromkeys("Mm", 833),
    **dict.fromkeys("%", 889),
    "W": 944,
    "@": 1015,
}
_WIDER = 1.15
_ROTATED = math.sqrt(0.5)  # sin and cos of the 45 degrees of rotated labels


@dataclass(frozen=True)
class Series:
    """One colour of bars: a value per category, with an optional interval per bar."""

    name: str
    values: Sequence[float | None]
    lower: Sequence[float | None] | None = None
    upper: Sequence[float | None] | None = None


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """The width in pixels that ``text`` takes at font size ``size``, over-estimated (see
    ``_ADVANCE``): what the plots size their margins by."""
    return size * _WIDER * sum(_ADVANCE.get(ch, 1000) for ch in text) / 1000.0


def _legend(
    names: Sequence[str], left: float, width: float
) -> tuple[list[tuple[float, int, str]], int]:
    """Place legend entries (swatch, gap, name) left to right, wrapping onto new lines within
    ``width``: each entry's x, line number and name, and the number of lines."""
    placed = []
    x, line = left, 0
    for name in names:
        entry = 14 + text_width(name) + 18
        if x > left and x + entry > left + width:
            x, line = left, line + 1
        placed.append((x, line, name))
        x += entry
    return placed, (line + 1 if names else 0)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw), default=raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def bar_chart_svg(
    *,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    y_label: str,
    y_min: float | None = None,
    y_max: float | None = None,
) -> str:
    """Return a grouped bar chart as SVG text; missing values leave a gap, intervals are drawn
    as whiskers."""
    values = [
        v
        for s in series
        for seq in (s.values, s.lower or [], s.upper or [])
        for v in seq
        if v is not None and math.isfinite(v)
    ]
    low = y_min if y_min is not None else min([0.0, *values])
    high = y_max if y_max is not None else max([1.0, *values])
    if high <= low:
        high = low + 1.0
    ticks = _ticks(low, high)
    # Margins from the labels they hold: the tick labels and the y label on the left; the
    # category labels below (turned 45 degrees when one is wider than its group) and then the
    # legend, wrapped onto as many lines as it needs.
    margin_left = 28 + max([text_width(f"{t:g}") for t in ticks] + [0.0]) + 6
    width = max(WIDTH, text_width(title, 14) + 32)
    plot_w = width - margin_left - MARGIN_RIGHT
    n_cat = max(len(categories), 1)
    group_w = plot_w / n_cat
    widest = max([text_width(c) for c in categories] + [0.0])
    rotate = widest > group_w - 4
    # A turned label's box: its length plus a line's height, both at 45 degrees.
    turned = (widest + FONT_SIZE) * _ROTATED
    label_h = turned + 8 if rotate else 14.0
    if rotate:
        # A turned label runs left from its group's middle: the first one must not leave the plot.
        # The first label's middle, margin + (width - margin - right) / (2 n), must be at
        # least its turned length from the left edge.
        half = 1.0 / (2 * n_cat)
        needed = (turned + 4 - (width - MARGIN_RIGHT) * half) / (1.0 - half)
        if needed > margin_left:
            margin_left = needed
            plot_w = width - margin_left - MARGIN_RIGHT
            group_w = plot_w / n_cat
    legend, legend_lines = _legend([s.name for s in series], margin_left, plot_w)
    plot_h = PLOT_HEIGHT
    legend_top = MARGIN_TOP + plot_h + 8 + label_h + 10
    height = int(math.ceil(legend_top + 16 * legend_lines + 8))

    def y_of(v: float) -> float:
        clipped = min(max(v, low), high)
        return MARGIN_TOP + plot_h * (high - clipped) / (high - low)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" height="{height}" '
        f'viewBox="0 0 {_fmt(width)} {height}" role="img" aria-label="{escape(title)}" '
        f'font-family="sans-serif" font-size="{FONT_SIZE}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{_fmt(width)}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_fmt(width / 2)}" y="20" text-anchor="middle" font-size="14">'
        f"{escape(title)}</text>",
    ]
    right = width - MARGIN_RIGHT
    for tick in ticks:
        y = y_of(tick)
        parts.append(
            f'<line x1="{_fmt(margin_left)}" x2="{_fmt(right)}" y1="{_fmt(y)}" y2="{_fmt(y)}" '
            'stroke="#dddddd"/>'
        )
        parts.append(
            f'<text x="{_fmt(margin_left - 6)}" y="{_fmt(y + 4)}" text-anchor="end">{tick:g}</text>'
        )
    zero = y_of(0.0) if low <= 0.0 <= high else y_of(low)
    parts.append(
        f'<line x1="{_fmt(margin_left)}" x2="{_fmt(right)}" y1="{_fmt(zero)}" '
        f'y2="{_fmt(zero)}" stroke="#333333"/>'
    )
    parts.append(
        f'<text x="14" y="{MARGIN_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    bar_w = group_w * 0.8 / max(len(series), 1)
    for c, category in enumerate(categories):
        x0 = margin_left + c * group_w + group_w * 0.1
        for s_i, s in enumerate(series):
            value = s.values[c] if c < len(s.values) else None
            if value is None or not math.isfinite(value):
                continue
            x = x0 + s_i * bar_w
            top, bottom = sorted((y_of(value), zero))
            parts.append(
                f'<rect x="{_fmt(x)}" y="{_fmt(top)}" width="{_fmt(bar_w * 0.9)}" '
                f'height="{_fmt(max(bottom - top, 0.5))}" {series_paint(s_i)}>'
                f"<title>{escape(s.name)}, {escape(category)}: {value:.4g}</title></rect>"
            )
            lo = s.lower[c] if s.lower is not None and c < len(s.lower) else None
            hi = s.upper[c] if s.upper is not None and c < len(s.upper) else None
            if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
                mid = x + bar_w * 0.45
                parts.append(
                    f'<line x1="{_fmt(mid)}" x2="{_fmt(mid)}" y1="{_fmt(y_of(lo))}" '
                    f'y2="{_fmt(y_of(hi))}" stroke="#222222"/>'
                )
        label_x = margin_left + c * group_w + group_w / 2
        label_y = MARGIN_TOP + plot_h + 14
        if rotate:
            parts.append(
                f'<text x="{_fmt(label_x)}" y="{_fmt(label_y)}" text-anchor="end" '
                f'transform="rotate(-45 {_fmt(label_x)} {_fmt(label_y)})">'
                f"{escape(category)}</text>"
            )
        else:
            parts.append(
                f'<text x="{_fmt(label_x)}" y="{_fmt(label_y)}" text-anchor="middle">'
                f"{escape(category)}</text>"
            )
    for s_i, (x, line, name) in enumerate(legend):
        y = legend_top + 16 * line + 10
        parts.append(
            f'<rect x="{_fmt(x)}" y="{_fmt(y - 9)}" width="10" height="10" {series_paint(s_i)}/>'
        )
        parts.append(f'<text x="{_fmt(x + 14)}" y="{_fmt(y)}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def histogram_svg(*, title: str, counts: Mapping[str, int]) -> str:
    """Return a histogram of counts per bin (for example shown Likert scores 1-8) as SVG text."""
    bins = sorted(counts, key=int)
    total = sum(int(counts[b]) for b in bins) or 1
    shares = [int(counts[b]) / total for b in bins]
    return bar_chart_svg(
        title=title,
        categories=[str(b) for b in bins],
        series=[Series(name="share of scores", values=shares)],
        y_label="share",
        y_min=0.0,
        y_max=max([0.5, *shares]),
    )


def _heat_colour(value: float) -> str:
    """White at 0.5, shading to blue towards 1 and to orange towards 0."""
    t = min(max(value, 0.0), 1.0)
    if t >= 0.5:
        target, weight = (59, 110, 168), (t - 0.5) * 2
    else:
        target, weight = (217, 130, 43), (0.5 - t) * 2
    r, g, b = (round(255 + (c - 255) * weight) for c in target)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap_svg(
    *,
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    values: Sequence[Sequence[float | None]],
) -> str:
    """Return a matrix of shares (0 to 1) as an SVG heatmap with each value written in its cell;
    missing values are grey with an en dash."""
    cell = 56
    footer = "share of wins of the row model against the column model (a tie is half a win)"
    # Row labels end at the grid's left edge; column labels start above their column's middle
    # and run up and right at 45 degrees: the margins are sized to the longest of each.
    left = 16 + max([text_width(r) for r in rows] + [0.0]) + 6
    column_widths = [text_width(c) for c in columns]
    top = 30 + (max(column_widths + [0.0]) + FONT_SIZE) * _ROTATED + 8
    reach = max(
        [
            left + j * cell + cell / 2 + (w + FONT_SIZE) * _ROTATED
            for j, w in enumerate(column_widths)
        ]
        + [0.0]
    )
    width = math.ceil(
        max(
            left + cell * len(columns) + 16,
            reach + 16,
            text_width(footer) + 32,
            text_width(title, 14) + 32,
            480,
        )
    )
    height = math.ceil(top + cell * len(rows) + 40)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        f'font-family="sans-serif" font-size="{FONT_SIZE}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for j, column in enumerate(columns):
        x = left + j * cell + cell / 2
        parts.append(
            f'<text x="{_fmt(x)}" y="{_fmt(top - 8)}" text-anchor="start" '
            f'transform="rotate(-45 {_fmt(x)} {_fmt(top - 8)})">{escape(column)}</text>'
        )
    for i, row in enumerate(rows):
        y = top + i * cell
        parts.append(
            f'<text x="{_fmt(left - 6)}" y="{_fmt(y + cell / 2 + 4)}" text-anchor="end">'
            f"{escape(row)}</text>"
        )
        for j, column in enumerate(columns):
            value = values[i][j] if j < len(values[i]) else None
            x = left + j * cell
            known = value is not None and math.isfinite(value)
            fill = _heat_colour(value) if known and value is not None else "#eeeeee"
            label = f"{value:.2f}" if known and value is not None else "–"
            parts.append(
                f'<rect x="{_fmt(x)}" y="{_fmt(y)}" width="{cell}" height="{cell}" fill="{fill}" '
                f'stroke="#ffffff"><title>{escape(row)} vs {escape(column)}: {label}</title></rect>'
            )
            parts.append(
                f'<text x="{_fmt(x + cell / 2)}" y="{_fmt(y + cell / 2 + 4)}" '
                f'text-anchor="middle">{label}</text>'
            )
    parts.append(f'<text x="16" y="{height - 12}">{footer}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
