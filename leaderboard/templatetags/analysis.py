"""Formatting of report cells on the analysis pages."""

from __future__ import annotations

import math
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from annotation.rendering import markdown_render_safe
from leaderboard.report.cells import IntervalCell

register = template.Library()

_SHARE_COLUMNS = ("rate", "prefers first shown", "flip rate", "accuracy", "share")


@register.filter
def cell(value: Any, column: str) -> str:
    """Format a table cell: shares as whole percents, other floats to three decimals, missing
    values as an en dash."""
    if isinstance(value, IntervalCell):
        if value.lower is None or value.upper is None:
            return cell(value.value, column)
        return (
            f"{cell(value.value, column)} "
            f"[{cell(value.lower, column)}, {cell(value.upper, column)}]"
        )
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if any(column.endswith(name) for name in _SHARE_COLUMNS):
            return f"{round(100 * value)}%"
        return f"{value:.3f}"
    return str(value)


@register.filter
def is_number(value: Any) -> bool:
    """True for numbers and estimates with intervals (right-aligned in tables)."""
    if isinstance(value, IntervalCell):
        return True
    return isinstance(value, int | float) and not isinstance(value, bool)


@register.filter
def column_label(column: str, groups: tuple[tuple[str, int], ...]) -> str:
    """A column's header under a group row: "rating" for "human: rating" when the table has
    column groups (the group row names the source)."""
    if groups and ": " in column:
        return column.split(": ", 1)[1]
    return column


@register.filter
def markdown_safe(text: str) -> SafeString:
    """A prompt's or answer's markdown as sanitised HTML, as the worker's page renders it
    (annotation.rendering: markdown-it, then nh3 with an allow-list; scripts and handlers go)."""
    return mark_safe(markdown_render_safe(str(text or "")))  # noqa: S308 - sanitised by nh3
