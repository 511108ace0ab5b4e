"""What every report section shares: its inputs, its tables and plots, and the contract a section
module fulfils (:class:`Section`), with the one JSON serialisation of typed results.

A section's result is a frozen dataclass whose fields are numbers, strings, booleans, None,
lists, tuples, ``dict[str, ...]``, other such dataclasses (the ones of ``leaderboard.stats``
included) and ``Literal`` values; a field whose JSON key is a Python keyword names it in its
metadata (``field(metadata={"json": "with"})``). :func:`to_json` writes a result as JSON-ready
values (floats with 10 significant digits, NaN and infinities as null) and :func:`from_json`
reads it back into the same types (a null in a field typed ``float`` becomes NaN), so the page,
the CSV and the HTML report work on typed results read from a stored snapshot, never on the
payload's keys.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, Union

import numpy as np
import numpy.typing as npt

from leaderboard.report.cells import IntervalCell
from leaderboard.selectors.frames import StudyVotes
from leaderboard.selectors.reads import Read, ReadValue
from leaderboard.stats.bootstrap import ClusterProportion, cluster_share
from leaderboard.stats.correlation import Correlation, correlation, correlation_over_clusters

if TYPE_CHECKING:
    import pandas as pd

HUMAN = "human"
R = TypeVar("R")
V = TypeVar("V", bound=ReadValue)


Resample = Literal["prompt", "vote"]
# Work budgets that keep a large study's report within its time: a bootstrap's rounds are cut
# (never below MIN_ROUNDS) so that rounds x battles (Elo) or rounds x prompts (Bradley-Terry
# over prompts) stays under these; the report states the rounds it used.
ELO_UPDATES_BUDGET = 50_000_000
BT_PROMPT_DRAWS_BUDGET = 2_000_000
MIN_ROUNDS = 100


@dataclass(frozen=True)
class ReportParams:
    """Statistical parameters of a report (filters are separate).

    resample: what a bootstrap round of the agreement, Elo and Bradley-Terry intervals draws
    with replacement: ``prompt`` (default: all of a prompt's units and votes together, the honest
    uncertainty about new prompts) or ``vote`` (each unit or battle on its own, FastChat's
    choice). baseline: the system the length-controlled win rates compare every model with
    ("": the system in the most pairs, the first by name among equals). pl_usd_per_1000: the
    price the researcher puts on a PL reward model's compute, in USD per 1,000 pairs scored
    (0: not priced; its calls cost nothing on the judge ledger).
    """

    seed: int = 0
    ci_rounds: int = 1000
    elo_rounds: int = 1000
    bt_rounds: int = 1000
    confidence: float = 0.95
    resample: Resample = "prompt"
    baseline: str = ""
    pl_usd_per_1000: float = 0.0


def rounds_within(requested: int, work_per_round: int, budget: int) -> int:
    """The bootstrap rounds to run: the requested ones, cut so that rounds x work per round
    stays within the budget, but never below MIN_ROUNDS (nor above the request)."""
    if work_per_round <= 0:
        return requested
    return min(requested, max(MIN_ROUNDS, budget // work_per_round))


@dataclass(frozen=True)
class ReportData:
    """The inputs of every section's compute function, read once (no database access after).

    reads: the values of the sections' declared reads, by read key (:meth:`read`); frames: each
    source's votes (``human`` first, then each judge source by name), majority: each pair's
    people's majority label (:func:`leaderboard.stats.majority.people_majority`).
    """

    votes: StudyVotes
    reads: Mapping[str, Any]
    params: ReportParams
    frames: Mapping[str, pd.DataFrame]
    majority: pd.Series

    def read(self, read: Read[V]) -> V:
        """The value of one of the section's declared reads (``Section.reads``); a read the
        section did not declare is refused, so that a section's declaration is all it reads."""
        try:
            return typing.cast(V, self.reads[read.key])
        except KeyError:
            raise LookupError(
                f"the read {read.key!r} was not declared by this section (Section.reads)"
            ) from None

    def for_section(self, section: Section[Any]) -> ReportData:
        """These inputs with only the reads `section` declares."""
        keys = {read.key for read in section.reads}
        return dataclasses.replace(self, reads={k: v for k, v in self.reads.items() if k in keys})

    @property
    def judge_names(self) -> list[str]:
        """The judge sources' names, in the votes' order."""
        return [s.name for s in self.votes.sources]


@dataclass(frozen=True)
class Table:
    """One table of the page, with a stable name used in its CSV URL. Cells hold raw values."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""
    # Column groups shown above the header, as (label, number of columns); empty for none.
    groups: tuple[tuple[str, int], ...] = ()

    def cells(self) -> list[list[tuple[Any, str]]]:
        """Rows of (value, column name) pairs, for formatting by column."""
        return [list(zip(row, self.columns, strict=True)) for row in self.rows]

    def page(self) -> PageTable:
        """The table as the page shows it. A table of at most PAGE_WIDE_COLUMNS columns shows as
        it is. A wider one (the consistency table has 32 columns, a leaderboard of five sources
        21) would run off a 1280 px screen: each estimate and the lower and upper columns that
        follow it (``x_lower``, ``x_upper`` or ``g: lower``, ``g: upper``) become one cell,
        headers lose their underscores, and a table without column groups and with at most
        PAGE_TURN_ROWS rows is turned, its measures down the page and its rows across. The CSV
        and the JSON keep the table as it is."""
        if len(self.columns) <= PAGE_WIDE_COLUMNS:
            return PageTable(self.columns, self.cells(), self.groups)
        merged: list[tuple[str, int, int | None]] = []  # (column, its index, upper's index)
        i = 0
        while i < len(self.columns):
            column, lower, upper = self.columns[i], i + 1, i + 2
            if (
                upper < len(self.columns)
                and self.columns[lower].endswith("lower")
                and self.columns[upper] == self.columns[lower][: -len("lower")] + "upper"
            ):
                merged.append((column, i, upper))
                i += 3
            else:
                merged.append((column, i, None))
                i += 1

        def value(row: tuple[Any, ...], index: int, upper: int | None) -> Any:
            if upper is None:
                return row[index]
            return IntervalCell(row[index], row[upper - 1], row[upper])

        labels = [
            column.replace("_", " ") + (" [interval]" if upper is not None else "")
            for column, _, upper in merged
        ]
        if self.groups or len(self.rows) > PAGE_TURN_ROWS:
            groups, start = [], 0
            for label, span in self.groups:
                kept = sum(1 for _, index, _ in merged if start <= index < start + span)
                groups.append((label, kept))
                start += span
            cells = [
                [(value(row, i, upper), column) for column, i, upper in merged] for row in self.rows
            ]
            return PageTable(tuple(labels), cells, tuple(groups))
        header = ("measure", *(str(row[0]) for row in self.rows))
        turned = [
            [(label, ""), *((value(row, i, upper), column) for row in self.rows)]
            for label, (column, i, upper) in zip(labels[1:], merged[1:], strict=True)
        ]
        return PageTable(header, turned, ())


# See Table.page.
PAGE_WIDE_COLUMNS = 16
PAGE_TURN_ROWS = 10


@dataclass(frozen=True)
class PageTable:
    """What the page's table template reads: header labels, rows of (value, column) pairs for
    the cell formatting, and the column groups above the header."""

    columns: tuple[str, ...]
    cells: list[list[tuple[Any, str]]]
    groups: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Plot:
    """One SVG plot of the page, with a stable name used in its download URL."""

    name: str
    title: str
    svg: str
    note: str = ""


@dataclass(frozen=True)
class RenderContext:
    """What a section's tables and plots may know besides its own result."""

    sources: tuple[str, ...]  # "human" first, then the judge sources sorted by name
    definition: str  # the report's agreement definition

    @property
    def judges(self) -> tuple[str, ...]:
        return tuple(s for s in self.sources if s != HUMAN)


class Section(Generic[R]):
    """One section of the report: a key (its anchor and, by default, its JSON key), a title, a
    one-line definition, the result type, and how to compute, serialise and show it.

    A section module defines a subclass and one instance; the registry lists the instance. The
    defaults write the result under ``payload[key]``; a section whose JSON spreads over several
    top-level keys (the agreement section, for the documented keys) overrides ``dump`` / ``load``.
    """

    key: ClassVar[str]
    title: ClassVar[str]
    definition: ClassVar[str]
    result_type: ClassVar[type]
    # A section whose compute mostly runs compiled code without Python's lock (the Elo kernel)
    # is computed in a thread of its own beside the others.
    releases_gil: ClassVar[bool] = False
    # What the section reads besides the votes (leaderboard.selectors.section_reads): each read
    # runs once for all the sections that declare it, and compute sees only these.
    reads: ClassVar[tuple[Read[Any], ...]] = ()

    def compute(self, data: ReportData) -> R:
        raise NotImplementedError

    def payload_keys(self) -> tuple[str, ...]:
        """The top-level JSON keys the section writes."""
        return (self.key,)

    def tables(self, result: R, context: RenderContext) -> list[Table]:
        return []

    def plots(self, result: R, context: RenderContext) -> list[Plot]:
        return []

    def dump(self, result: R) -> dict[str, Any]:
        """The section's part of the JSON payload, by top-level key."""
        return {self.key: to_json(result)}

    def load(self, payload: Mapping[str, Any]) -> R:
        """The section's typed result, read back from a payload written by :meth:`dump`."""
        return typing.cast(R, from_json(self.result_type, payload[self.key]))


# --- JSON --------------------------------------------------------------------------------------


def clean_number(value: float | np.floating[Any]) -> float | None:
    """A float as the report writes it: 10 significant digits; NaN and infinities as None."""
    number = float(value)
    if not math.isfinite(number):
        return None
    return float(format(number, ".10g"))


def to_json(value: Any) -> Any:
    """A typed value as JSON-ready values with a fixed float format."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {json_name(f): to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return clean_number(value)
    if value is None or isinstance(value, str):
        return value
    # Imported here, past every other case: a page that writes a result loads no pandas.
    import pandas as pd

    if value is pd.NA:
        return None
    raise TypeError(f"cannot put {type(value).__name__} into a report")


def json_name(field: dataclasses.Field[Any]) -> str:
    """A field's JSON key: its name, or ``metadata={"json": ...}`` (for a Python keyword)."""
    return str(field.metadata.get("json", field.name))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(tp: Any, data: Any) -> Any:
    """Read JSON-ready ``data`` back into the type ``tp`` (see the module docstring)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        real = [o for o in options if o is not type(None)]
        if len(real) == 1:
            return from_json(real[0], data)
        return data
    if origin is Literal:
        if data not in typing.get_args(tp):
            raise ValueError(f"{data!r} is not one of {typing.get_args(tp)}")
        return data
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, Mapping):
            raise ValueError(f"{tp.__name__}: expected an object, got {type(data).__name__}")
        hints = _hints(tp)
        return tp(
            **{
                f.name: from_json(hints[f.name], data[json_name(f)])
                for f in dataclasses.fields(tp)
                if f.init and json_name(f) in data
            }
        )
    if origin in (dict, Mapping):
        key_type, value_type = typing.get_args(tp)
        convert = int if key_type is int else str
        return {convert(k): from_json(value_type, v) for k, v in data.items()}
    if origin in (list, Sequence):
        (item,) = typing.get_args(tp)
        return [from_json(item, v) for v in data]
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in data)
        return tuple(from_json(a, v) for a, v in zip(args, data, strict=True))
    if tp is float:
        return math.nan if data is None else float(data)
    if tp is int:
        return int(data)
    return data


def prompt_clusters(data: ReportData, pair_ids: npt.ArrayLike) -> npt.NDArray[np.int64] | None:
    """The prompt of each pair id, as a bootstrap over prompts draws them; None when the report
    resamples votes (``params.resample == "vote"``: every unit its own cluster). A pair outside
    the report's pairs is a cluster of its own (its negated id)."""
    import pandas as pd

    if data.params.resample != "prompt":
        return None
    ids = np.asarray(pair_ids, dtype=np.int64)
    pairs = data.votes.pairs
    at = pd.Index(pairs["pair_id"].to_numpy(dtype=np.int64)).get_indexer(ids)
    prompts = pairs["prompt_id"].to_numpy(dtype=np.int64)[np.maximum(at, 0)] if ids.size else ids
    return np.where(at >= 0, prompts, -ids - 1)


def share_over_prompts(
    data: ReportData,
    counts: npt.ArrayLike,
    pair_ids: npt.ArrayLike,
    *,
    unit: str,
    totals: npt.ArrayLike | None = None,
) -> ClusterProportion:
    """The share sum(counts) / sum(totals) over units on pairs (votes, calls, judgments), with
    the report's bootstrap interval: a round draws prompts with replacement and takes all their
    units (:func:`leaderboard.stats.bootstrap.cluster_share`), since the votes on one prompt
    share its difficulty and are not independent; with ``params.resample == "vote"`` it draws
    the units themselves. ``totals`` defaults to 1 per unit. Seed and confidence are the
    report's; the rounds ``params.ci_rounds``, cut to BT_PROMPT_DRAWS_BUDGET draws (never below
    MIN_ROUNDS) and stated in the result. The result says its ``unit`` and what a round drew
    (``resampled``: "prompt", or the unit)."""
    hit = np.asarray(counts, dtype=np.float64)
    size = np.ones_like(hit) if totals is None else np.asarray(totals, dtype=np.float64)
    clusters = prompt_clusters(data, pair_ids)
    drawn = hit.size if clusters is None else len(np.unique(clusters))
    params = data.params
    return cluster_share(
        hit,
        size,
        clusters,
        unit=unit,
        resampled=unit if clusters is None else "prompt",
        rounds=rounds_within(params.ci_rounds, drawn, BT_PROMPT_DRAWS_BUDGET),
        seed=params.seed,
        confidence=params.confidence,
    )


# Up to this many items a correlation gets the bootstrap over prompts; beyond it (a large
# sample, where Fisher's z holds) the Fisher-z interval, so a report stays in its time.
BOOTSTRAP_UNITS = 20_000


def correlation_over_prompts(
    data: ReportData,
    xs: npt.NDArray[np.float64],
    ys: npt.NDArray[np.float64],
    prompts: npt.NDArray[np.int64] | None,
    method: Literal["pearson", "spearman"],
) -> Correlation:
    """A correlation over units or votes with the report's interval: a bootstrap over their
    prompts (:func:`leaderboard.stats.correlation.correlation_over_clusters`; each item its own
    cluster when ``prompts`` is None or ``resample == "vote"``), seed and ci_rounds as the
    report's, cut to 2M item draws (never below 100); Fisher's z past BOOTSTRAP_UNITS items."""
    params = data.params
    if len(xs) > BOOTSTRAP_UNITS:
        return correlation(xs, ys, method, confidence=params.confidence)
    clusters = prompts if prompts is not None and params.resample == "prompt" else None
    return correlation_over_clusters(
        xs,
        ys,
        np.arange(len(xs)) if clusters is None else clusters,
        method,
        rounds=rounds_within(params.ci_rounds, len(xs), BT_PROMPT_DRAWS_BUDGET),
        seed=params.seed,
        confidence=params.confidence,
    )


def rate_or_none(agree: int, total: int) -> float | None:
    """agree / total, None without any comparison."""
    return agree / total if total else None
