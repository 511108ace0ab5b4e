"""The training curve as standalone SVG text (no scripts, no inline styles), like the report's
plots in leaderboard/plots.py, so it works under the site's Content-Security-Policy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 640, 280
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 32, 48
LINES = (("train_loss", "training loss", "#3b6ea8"), ("val_loss", "held-out loss", "#d9822b"))


def loss_curve_svg(curve: Sequence[Mapping[str, float | None]], *, title: str) -> str:
    """A line per loss (training, held-out) over the epochs; an empty frame before epoch 1."""
    points = {
        key: [
            (float(row["epoch"] or 0), float(value))
            for row in curve
            if (value := row.get(key)) is not None and math.isfinite(float(value))
        ]
        for key, _, _ in LINES
    }
    values = [y for series in points.values() for _, y in series]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    last_epoch = max([1.0, *(x for series in points.values() for x, _ in series)])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(epoch: float) -> float:
        return LEFT + plot_w * (epoch - 1) / max(last_epoch - 1, 1)

    def y_of(value: float) -> float:
        return TOP + plot_h * (high - value) / (high - low)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="13">{escape(title)}</text>',
    ]
    for i in range(5):
        value = low + (high - low) * i / 4
        y = y_of(value)
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#dddddd"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.3g}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 22}" text-anchor="middle">epoch '
        f"(1 to {int(last_epoch)})</text>"
    )
    for index, (key, label, colour) in enumerate(LINES):
        series = points[key]
        if series:
            path = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in series)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2">'
                f"<title>{escape(label)}: last {series[-1][1]:.4f}</title></polyline>"
            )
        x = LEFT + index * 160
        parts.append(
            f'<rect x="{x}" y="{HEIGHT - 14}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14}" y="{HEIGHT - 5}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)
