"""The whole report: metadata plus each registered section's typed result, computed from the
report's data, written as deterministic JSON (and CSV) and read back from a stored payload.

The same rows, parameters and seed give the same bytes from :func:`report_to_json`: keys are
sorted, floats are written with 10 significant digits, NaN becomes null, and nothing in the
payload depends on the clock. The JSON schema's version is :data:`SCHEMA_VERSION`; its changes
are listed in docs/analysis.md ("Schema changelog").
"""

from __future__ import annotations

import io
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from core import csvsafe
from core.errors import ApplicationError
from leaderboard.parallel import run_parallel
from leaderboard.report.base import (
    HUMAN,
    Plot,
    RenderContext,
    ReportData,
    Section,
    Table,
    from_json,
    to_json,
)
from leaderboard.report.registry import SECTIONS

R = TypeVar("R")
SCHEMA_VERSION = 19


def report_libraries_load() -> None:
    """Load now what computing a report uses, rather than in a process's first report: the
    compiled Elo kernel (stats.elo.elo_kernel_warm) and the libraries that the report's modules
    import only inside the functions that run them, so that a page serving a snapshot never
    loads them (pandas, scipy's stats, special functions and sparse matrices, pyarrow's CSV
    reader and compute functions). Called as each process of a worker serving the analysis
    queue starts (leaderboard.tasks.report_libraries_warm); without it the first report of a
    process paid about 0.5 s for scipy alone, in whichever section first asked for it
    (benchmarks/bench_report.py, per_category).
    """
    import pandas  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.csv  # noqa: F401
    import scipy.sparse  # noqa: F401
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401

    from leaderboard.stats.elo import elo_kernel_warm

    elo_kernel_warm()


class ReportPayloadError(ApplicationError, ValueError):
    """A stored payload that this code cannot read as a report (another schema version, or a
    section missing)."""


@dataclass(frozen=True)
class StudyRef:
    slug: str
    name: str


@dataclass(frozen=True)
class RaterSetRef:
    set: str
    definition: str


@dataclass(frozen=True)
class ReportMetadata:
    """What a report was computed from and with (seed, parameters, data hash, versions)."""

    schema_version: int
    software_version: str
    libraries: dict[str, str]
    study: StudyRef
    seed: int
    parameters: dict[str, Any]
    data_hash: str
    definition: str
    raters: RaterSetRef
    sources: list[str]  # "human" first, then the judge sources sorted by name


@dataclass(frozen=True)
class Report:
    """A report: its metadata and each registered section's result, by section key."""

    metadata: ReportMetadata
    results: Mapping[str, Any]

    def result(self, section: Section[R]) -> R:
        """The typed result of one section."""
        return typing.cast(R, self.results[section.key])

    @property
    def context(self) -> RenderContext:
        return RenderContext(tuple(self.metadata.sources), self.metadata.definition)


@dataclass(frozen=True)
class RenderedSection:
    """One section as the page shows it: anchor, title, definition, tables and plots."""

    key: str
    title: str
    definition: str
    tables: list[Table]
    plots: list[Plot]

    @property
    def anchor(self) -> str:
        return self.key.replace("_", "-")


def report_sources(data: ReportData) -> list[str]:
    """The report's sources: the people first, then the judge sources sorted by name."""
    return [HUMAN, *sorted(data.judge_names)]


def sections_compute(data: ReportData) -> dict[str, Any]:
    """Every registered section's result, by key, each computed from the reads it declares
    (:meth:`ReportData.for_section`). Sections that release Python's lock (the Elo kernel) run
    in a thread of their own beside the others."""
    threaded = [s for s in SECTIONS if s.releases_gil]
    here = [s for s in SECTIONS if not s.releases_gil]

    def compute_all(sections: list[Section[Any]]) -> dict[str, Any]:
        return {s.key: s.compute(data.for_section(s)) for s in sections}

    mine, theirs = run_parallel(
        lambda: compute_all(here), lambda: compute_all(threaded), uses_database=False
    )
    return {s.key: (mine | theirs)[s.key] for s in SECTIONS}


def report_to_payload(report: Report) -> dict[str, Any]:
    """The report as JSON-ready values: ``metadata`` and each section's keys."""
    payload: dict[str, Any] = {"metadata": to_json(report.metadata)}
    for section in SECTIONS:
        payload |= section.dump(report.results[section.key])
    return payload


def report_from_payload(payload: Mapping[str, Any]) -> Report:
    """The typed report of a stored payload; :class:`ReportPayloadError` when it cannot be read
    (the caller recomputes)."""
    try:
        metadata = from_json(ReportMetadata, payload["metadata"])
        if metadata.schema_version != SCHEMA_VERSION:
            raise ReportPayloadError(
                f"schema_version {metadata.schema_version}, this code reads {SCHEMA_VERSION}"
            )
        results = {s.key: s.load(payload) for s in SECTIONS}
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ReportPayloadError):
            raise
        raise ReportPayloadError(f"not a report of schema {SCHEMA_VERSION}: {exc!r}") from exc
    return Report(metadata, results)


def report_render(report: Report) -> list[RenderedSection]:
    """Each registered section's tables and plots, in the registry's order."""
    context = report.context
    return [
        RenderedSection(
            key=s.key,
            title=s.title,
            definition=s.definition,
            tables=s.tables(report.results[s.key], context),
            plots=s.plots(report.results[s.key], context),
        )
        for s in SECTIONS
    ]


def report_tables(report: Report) -> list[Table]:
    """The report's tables, in the order shown."""
    return [t for part in report_render(report) for t in part.tables]


def report_plots(report: Report) -> list[Plot]:
    """The report's plots, in the order shown."""
    return [p for part in report_render(report) for p in part.plots]


def report_table(report: Report, name: str) -> Table | None:
    """The table of that name, or None."""
    return next((t for t in report_tables(report) if t.name == name), None)


def report_plot(report: Report, name: str) -> Plot | None:
    """The plot of that name, or None."""
    return next((p for p in report_plots(report) if p.name == name), None)


def table_to_csv(table: Table) -> bytes:
    """The table as CSV bytes with a header row; empty cells for missing values."""
    out = io.StringIO()
    writer = csvsafe.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow(["" if v is None else v for v in row])
    return out.getvalue().encode("utf-8")


def payload_to_json(payload: Mapping[str, Any]) -> bytes:
    """A JSON-ready payload as deterministic bytes: sorted keys, two-space indent, UTF-8."""
    text = json.dumps(payload, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def report_to_json(report: Report) -> bytes:
    """The report as deterministic JSON bytes."""
    return payload_to_json(report_to_payload(report))


def _flatten(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        rows: list[tuple[str, Any]] = []
        for key in sorted(value):
            rows += _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(value, list):
        rows = []
        for i, item in enumerate(value):
            rows += _flatten(item, f"{prefix}[{i}]")
        return rows
    return [(prefix, value)]


def payload_flatten(payload: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A payload's leaves as (path, value) pairs, paths as in the JSON, in sorted order."""
    return _flatten(payload, "")


def payload_to_csv(payload: Mapping[str, Any]) -> bytes:
    """A payload as CSV bytes: one line per leaf, ``path,value`` (paths as in the JSON)."""
    out = io.StringIO()
    writer = csvsafe.writer(out, lineterminator="\n")
    writer.writerow(["path", "value"])
    for path, value in payload_flatten(payload):
        writer.writerow([path, "" if value is None else json.dumps(value)])
    return out.getvalue().encode("utf-8")
