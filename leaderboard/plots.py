"""Plots as standalone SVG text, drawn on the server: no scripts, no external assets, no inline
styles (presentation attributes only), so the pages work under a strict Content-Security-Policy
and every plot can be downloaded as the same file the page shows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#3b6ea8", "#d9822b", "#4a9a5b", "#b8474d", "#7a5ea8", "#8c6d4f", "#c36bb0", "#6b7b8c")
WIDTH = 720
HEIGHT = 320
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 16, 36, 64


@dataclass(frozen=True)
class Series:
    """One colour of bars: a value per category, with an optional interval per bar."""

    name: str
    values: Sequence[float | None]
    lower: Sequence[float | None] | None = None
    upper: Sequence[float | None] | None = None


def _fmt(x: float) -> str:
    return f"{x:.1f}"


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
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def y_of(v: float) -> float:
        clipped = min(max(v, low), high)
        return MARGIN_TOP + plot_h * (high - clipped) / (high - low)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for tick in _ticks(low, high):
        y = y_of(tick)
        parts.append(
            f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{_fmt(y)}" y2="{_fmt(y)}" '
            'stroke="#dddddd"/>'
        )
        parts.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end">{tick:g}</text>'
        )
    zero = y_of(0.0) if low <= 0.0 <= high else y_of(low)
    parts.append(
        f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{_fmt(zero)}" '
        f'y2="{_fmt(zero)}" stroke="#333333"/>'
    )
    parts.append(
        f'<text x="14" y="{MARGIN_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    n_cat = max(len(categories), 1)
    group_w = plot_w / n_cat
    bar_w = group_w * 0.8 / max(len(series), 1)
    for c, category in enumerate(categories):
        x0 = MARGIN_LEFT + c * group_w + group_w * 0.1
        for s_i, s in enumerate(series):
            value = s.values[c] if c < len(s.values) else None
            if value is None or not math.isfinite(value):
                continue
            x = x0 + s_i * bar_w
            top, bottom = sorted((y_of(value), zero))
            colour = PALETTE[s_i % len(PALETTE)]
            parts.append(
                f'<rect x="{_fmt(x)}" y="{_fmt(top)}" width="{_fmt(bar_w * 0.9)}" '
                f'height="{_fmt(max(bottom - top, 0.5))}" fill="{colour}">'
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
        label_x = MARGIN_LEFT + c * group_w + group_w / 2
        label_y = HEIGHT - MARGIN_BOTTOM + 14
        parts.append(
            f'<text x="{_fmt(label_x)}" y="{label_y}" text-anchor="middle">'
            f"{escape(category)}</text>"
        )
    for s_i, s in enumerate(series):
        x = MARGIN_LEFT + s_i * 170
        y = HEIGHT - 18
        parts.append(
            f'<rect x="{x}" y="{y - 9}" width="10" height="10" '
            f'fill="{PALETTE[s_i % len(PALETTE)]}"/>'
        )
        parts.append(f'<text x="{x + 14}" y="{y}">{escape(s.name[:26])}</text>')
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
    left, top = 150, 130
    width = max(left + cell * len(columns) + 16, 480)
    height = top + cell * len(rows) + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for j, column in enumerate(columns):
        x = left + j * cell + cell / 2
        parts.append(
            f'<text x="{_fmt(x)}" y="{top - 8}" text-anchor="start" '
            f'transform="rotate(-45 {_fmt(x)} {top - 8})">{escape(column[:24])}</text>'
        )
    for i, row in enumerate(rows):
        y = top + i * cell
        parts.append(
            f'<text x="{left - 6}" y="{_fmt(y + cell / 2 + 4)}" text-anchor="end">'
            f"{escape(row[:24])}</text>"
        )
        for j, column in enumerate(columns):
            value = values[i][j] if j < len(values[i]) else None
            x = left + j * cell
            known = value is not None and math.isfinite(value)
            fill = _heat_colour(value) if known and value is not None else "#eeeeee"
            label = f"{value:.2f}" if known and value is not None else "–"
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" '
                f'stroke="#ffffff"><title>{escape(row)} vs {escape(column)}: {label}</title></rect>'
            )
            parts.append(
                f'<text x="{_fmt(x + cell / 2)}" y="{_fmt(y + cell / 2 + 4)}" '
                f'text-anchor="middle">{label}</text>'
            )
    parts.append(
        f'<text x="16" y="{height - 12}">'
        "share of wins of the row model against the column model (a tie is half a win)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)
