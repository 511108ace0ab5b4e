"""The report service: gather a study's rows, compute every registered section
(:mod:`leaderboard.report`), and store the result as a snapshot.

The report itself is typed (:class:`leaderboard.report.document.Report`); what is stored and
served is its JSON payload, which :func:`leaderboard.report.document.report_from_payload` reads
back into the typed report.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import asdict
from functools import cache
from importlib import metadata
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.models import Study
from leaderboard.models import ReportSnapshot
from leaderboard.parallel import run_parallel
from leaderboard.report.agreement import DEFINITION
from leaderboard.report.base import ReportData, ReportParams, to_json
from leaderboard.report.document import (
    SCHEMA_VERSION,
    RaterSetRef,
    Report,
    ReportMetadata,
    StudyRef,
    payload_flatten,
    payload_to_csv,
    payload_to_json,
    report_sources,
    report_to_payload,
    sections_compute,
)
from leaderboard.section_selectors import (
    ReportExtras,
    extras_data_hash,
    report_extra_rows_get,
    report_extras_get,
    report_lengths_get,
)
from leaderboard.selectors import (
    StudyVotes,
    VoteFilters,
    report_snapshot_find,
    rows_of_run,
    study_judge_sources,
    study_raters_resolve,
    study_votes_get,
    votes_data_hash,
)
from leaderboard.stats.majority import people_majority

__all__ = ["ReportParams", "agreement_report_build", "agreement_report_snapshot"]

RATERS_DEFINITION = {
    "experts": "only raters whose id starts with expert_ (MT-Bench's experts; authors left out)",
    "all": "every rater",
}


@cache
def software_version() -> str:
    """Concord's version, as pyproject.toml states it."""
    with (settings.BASE_DIR / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


@cache
def _library_versions() -> dict[str, str]:
    """The installed versions of the libraries behind the numbers, read once per process: the
    code a process runs does not change under it, and reading package metadata takes a second."""
    versions = {}
    for name in ("numpy", "pandas", "scipy", "krippendorff", "django"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def report_data(*, votes: StudyVotes, extras: ReportExtras, params: ReportParams) -> ReportData:
    """The sections' inputs: the frames by source and the people's majority, computed once."""
    frames = {"human": votes.human}
    for source in votes.sources:
        frames[source.name] = rows_of_run(votes.judges, source.run_id)
    return ReportData(
        votes=votes,
        extras=extras,
        params=params,
        frames=frames,
        majority=people_majority(votes.human),
    )


def _params_dict(filters: VoteFilters, params: ReportParams) -> dict[str, Any]:
    return {"filters": filters.as_params(), **asdict(params)}


def params_hash(*, filters: VoteFilters, params: ReportParams) -> str:
    """SHA-256 of the canonical parameters, the key a snapshot is found by."""
    text = json.dumps(to_json(_params_dict(filters, params)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def agreement_report_build(
    *, study: Study, filters: VoteFilters | None = None, params: ReportParams | None = None
) -> dict[str, Any]:
    """Gather the study's votes and compute its agreement report, with metadata."""
    filters = filters or VoteFilters()
    params = params or ReportParams()
    votes, extras = _votes_and_extras_get(study=study, filters=filters)
    return _payload(study=study, votes=votes, filters=filters, params=params, extras=extras)


def _votes_and_extras_get(*, study: Study, filters: VoteFilters) -> tuple[StudyVotes, ReportExtras]:
    """The votes and the extra rows; the answer lengths and the other extra rows (which need
    only the filters, the rater set and the runs) are read beside the votes, by PostgreSQL in
    processes of their own."""
    raters = study_raters_resolve(study=study, raters=filters.raters)
    run_ids = [s.run_id for s in study_judge_sources(study=study, filters=filters)]
    votes, lengths, rows = run_parallel(
        lambda: study_votes_get(study=study, filters=filters),
        lambda: report_lengths_get(study=study, filters=filters),
        lambda: report_extra_rows_get(study=study, filters=filters, raters=raters, run_ids=run_ids),
        uses_database=True,
    )
    return votes, report_extras_get(study=study, votes=votes, lengths=lengths, rows=rows)


def report_data_hash(*, votes: StudyVotes, extras: ReportExtras) -> str:
    """SHA-256 over the votes' hash and the extra rows' hash (answer lengths, values, ranks)."""
    both = votes_data_hash(votes=votes) + extras_data_hash(extras=extras)
    return hashlib.sha256(both.encode()).hexdigest()


def report_compute(
    *,
    study: Study,
    votes: StudyVotes,
    filters: VoteFilters,
    params: ReportParams,
    extras: ReportExtras | None = None,
) -> Report:
    """The typed report of gathered votes (the extra rows are read here when not given)."""
    read = extras or report_extras_get(study=study, votes=votes)
    data = report_data(votes=votes, extras=read, params=params)
    # The data hash is computed beside the sections (hashlib releases Python's lock).
    data_hash, results = run_parallel(
        lambda: report_data_hash(votes=votes, extras=read),
        lambda: sections_compute(data),
        uses_database=False,
    )
    params_out = _params_dict(filters, params)
    params_out["filters"]["raters"] = votes.raters
    meta = ReportMetadata(
        schema_version=SCHEMA_VERSION,
        software_version=software_version(),
        libraries=dict(_library_versions()),
        study=StudyRef(study.slug, study.name),
        seed=params.seed,
        parameters=to_json(params_out),
        data_hash=data_hash,
        definition=DEFINITION,
        raters=RaterSetRef(votes.raters, RATERS_DEFINITION[votes.raters]),
        sources=report_sources(data),
    )
    return Report(meta, results)


def _payload(
    *,
    study: Study,
    votes: StudyVotes,
    filters: VoteFilters,
    params: ReportParams,
    extras: ReportExtras | None = None,
) -> dict[str, Any]:
    report = report_compute(study=study, votes=votes, filters=filters, params=params, extras=extras)
    return report_to_payload(report)


def agreement_report_snapshot(
    *, study: Study, filters: VoteFilters | None = None, params: ReportParams | None = None
) -> ReportSnapshot:
    """Return the stored report for these parameters and the study's current rows, computing
    and storing it first when the rows changed or it was never computed."""
    filters = filters or VoteFilters()
    params = params or ReportParams()
    votes, extras = _votes_and_extras_get(study=study, filters=filters)
    data_hash = report_data_hash(votes=votes, extras=extras)
    key = params_hash(filters=filters, params=params)
    found = report_snapshot_find(study=study, params_hash=key, data_hash=data_hash)
    if found is not None:
        return found
    payload = _payload(study=study, votes=votes, filters=filters, params=params, extras=extras)
    with transaction.atomic():
        return ReportSnapshot.objects.create(
            study=study,
            params=payload["metadata"]["parameters"],
            params_hash=key,
            seed=params.seed,
            data_hash=data_hash,
            software_version=software_version(),
            payload=payload,
        )


def report_to_json(payload: Mapping[str, Any]) -> bytes:
    """A stored report payload as deterministic JSON bytes."""
    return payload_to_json(payload)


def report_flatten(payload: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A report payload's leaves as (path, value) pairs, paths as in the JSON, in sorted order."""
    return payload_flatten(payload)


def report_to_csv(payload: Mapping[str, Any]) -> bytes:
    """A report payload as CSV bytes: one line per leaf, ``path,value``."""
    return payload_to_csv(payload)
