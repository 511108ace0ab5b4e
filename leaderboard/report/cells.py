"""A report table's cell that holds an estimate with its interval.

Its own module, free of pandas and numpy: the analysis template tags format it, and Django loads
every tag library for every page, the annotator's and the log-in page included
(tests/config/test_lean_workers.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IntervalCell:
    """An estimate with its interval, shown in one cell of a wide table ("0.83 [0.71, 0.90]")."""

    value: Any
    lower: Any
    upper: Any

    def __str__(self) -> str:
        return f"{self.value} [{self.lower}, {self.upper}]"
