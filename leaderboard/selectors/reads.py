"""The contract of a report section's reads: what a section needs from the database besides the
votes, declared by the section (``Section.reads``) and read once for every section that declares
it.

A :class:`Read` names one selector that returns a frozen dataclass (a :class:`ReadValue`: it
feeds the report's data hash its own rows). The selector needs only the report's filters, rater
set and judge runs (:class:`ReadContext`), so that every read runs beside the votes; a read that
keeps only what the votes select (the prompts of the selected pairs) says so in ``narrow``,
applied once the votes are in. The reads themselves, and the one ordered registry the data hash
takes them in, are in :mod:`leaderboard.selectors.section_reads`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from annotation.models import Study
    from leaderboard.selectors.frames import RaterSet, StudyVotes, VoteFilters


class Hasher(Protocol):
    """What a read feeds its rows into (a ``hashlib`` object)."""

    def update(self, data: bytes, /) -> None: ...


class ReadValue(Protocol):
    """A read's result: a frozen dataclass that feeds the data hash what its numbers depend on."""

    def hash_update(self, digest: Hasher) -> None: ...


V = TypeVar("V", bound=ReadValue)


@dataclass(frozen=True)
class ReadContext:
    """What every read may use: the study, the report's filters, its resolved rater set and the
    ids of the judge runs it reads (in the votes' order)."""

    study: Study
    filters: VoteFilters
    raters: RaterSet
    run_ids: tuple[int, ...]


def _unchanged(value: Any, votes: StudyVotes) -> Any:
    return value


@dataclass(frozen=True)
class Read(Generic[V]):
    """One read a section may declare: a stable ``key`` (unique among the reads), the selector
    ``get`` (run beside the votes, on a connection of its own when ``heavy``: a read that keeps
    PostgreSQL busy for a while), and ``narrow``, what it keeps once the votes are known (by
    default all of it)."""

    key: str
    get: Callable[[ReadContext], V]
    heavy: bool = False
    narrow: Callable[[V, StudyVotes], V] = _unchanged

    def __repr__(self) -> str:
        return f"Read({self.key!r})"
