"""A report section declares what it reads besides the votes: every declared read is registered
(and so hashed), every registered read is used, each runs once for all its sections, and a
section sees only what it declared."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from annotation.models import Pair, Study
from leaderboard.report import document
from leaderboard.report.base import ReportData, Section
from leaderboard.report.registry import SECTIONS, reads_declared
from leaderboard.selectors import section_reads
from leaderboard.selectors.frames import VoteFilters
from leaderboard.selectors.reads import Read, ReadContext
from leaderboard.selectors.section_reads import (
    INCONSISTENCY,
    LENGTHS,
    READS,
    STYLES,
    reads_data_hash,
)
from leaderboard.services import reports
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.leaderboard.conftest import run_import
from tests.leaderboard.test_report_fast_path import random_study_files

FAST = ReportParams(ci_rounds=20, elo_rounds=5, bt_rounds=5)


def test_every_declared_read_is_registered_and_every_registered_read_is_declared() -> None:
    declared = {read.key for section in SECTIONS for read in section.reads}
    registered = [read.key for read in READS]
    assert len(set(registered)) == len(registered), "two reads share a key"
    assert declared == set(registered)
    assert [read.key for read in reads_declared()] == registered


def test_a_read_declared_but_not_registered_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    stray = Read("stray", section_reads.lengths_read)

    class Stray(Section[int]):
        key = "stray"
        reads = (stray,)

    from leaderboard.report import registry

    monkeypatch.setattr(registry, "SECTIONS", (*SECTIONS, Stray()))
    with pytest.raises(LookupError, match="stray"):
        reads_declared()


@dataclass(frozen=True)
class LengthsSeen:
    pairs: int


class ReadsLengths(Section[LengthsSeen]):
    key = "lengths_seen"
    title = "Lengths seen"
    definition = "How many pairs have lengths."
    result_type = LengthsSeen
    reads: ClassVar[tuple[Read[Any], ...]] = (LENGTHS,)

    def compute(self, data: ReportData) -> LengthsSeen:
        return LengthsSeen(len(data.read(LENGTHS).frame))


class ReadsUndeclared(ReadsLengths):
    key = "lengths_undeclared"
    reads = ()


@pytest.fixture
def study(db: None, tmp_path: Path) -> Study:
    run_import(random_study_files(tmp_path, 3))
    return Study.objects.get(slug="mt-bench")


def test_a_section_reads_what_it_declares_and_is_refused_what_it_does_not(
    monkeypatch: pytest.MonkeyPatch, study: Study
) -> None:
    monkeypatch.setattr(document, "SECTIONS", (*SECTIONS, ReadsLengths()))
    payload = agreement_report_build(study=study, params=FAST)
    assert payload["lengths_seen"]["pairs"] == Pair.objects.filter(study=study).count() == 48

    monkeypatch.setattr(document, "SECTIONS", (*SECTIONS, ReadsUndeclared()))
    with pytest.raises(LookupError, match="'lengths' was not declared"):
        agreement_report_build(study=study, params=FAST)


def test_each_declared_read_runs_once_for_all_the_sections_that_declare_it(
    monkeypatch: pytest.MonkeyPatch, study: Study
) -> None:
    # Several sections declare the lengths.
    assert sum(LENGTHS in s.reads for s in SECTIONS) > 1
    calls: list[str] = []

    def counted(read: Read[Any]) -> Read[Any]:
        def get(ctx: ReadContext) -> Any:
            calls.append(read.key)
            return read.get(ctx)

        return Read(read.key, get, heavy=read.heavy, narrow=read.narrow)

    wrapped = tuple(counted(read) for read in reads_declared())
    monkeypatch.setattr(reports, "reads_declared", lambda: wrapped)
    reports.votes_and_reads_get(study=study, filters=VoteFilters())
    assert sorted(calls) == sorted(read.key for read in READS)


def test_the_data_hash_follows_every_read_and_each_reads_own_rows(study: Study) -> None:
    votes, reads = reports.votes_and_reads_get(study=study, filters=VoteFilters())
    base = reads_data_hash(reads)
    assert reads_data_hash(dict(reads)) == base
    lengths = reads[LENGTHS.key].frame.copy()
    lengths.loc[0, "len_a"] = 12345.0
    changed = {**reads, LENGTHS.key: section_reads.AnswerLengths(lengths)}
    assert reads_data_hash(changed) != base
    marked = reads[INCONSISTENCY.key].frame.copy()
    assert len(marked) == 1
    marked.loc[0, "inconsistent"] += 1
    recounted = {**reads, INCONSISTENCY.key: section_reads.ImportedInconsistency(marked)}
    assert reads_data_hash(recounted) != base
    # A read that finds nothing (these answers have no text, so no style counts) feeds nothing:
    # a study it finds nothing in keeps the hash it had before the read existed.
    assert len(reads[STYLES.key].frame) == 0
    assert reads_data_hash({k: v for k, v in reads.items() if k != STYLES.key}) == base
    # The report records it beside the votes' hash.
    report = reports.report_compute(
        study=study, votes=votes, filters=VoteFilters(), params=FAST, reads=reads
    )
    assert report.metadata.data_hash == reports.report_data_hash(votes=votes, reads=reads)
