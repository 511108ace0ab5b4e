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
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, Q, QuerySet, Value, When
from django.utils import timezone
from psycopg import sql as pgsql

from annotation.models import Study
from core.broker import BrokerUnavailable, task_send
from core.queues import Queue
from core.tasks import failure_reason
from leaderboard.lookup import rows_of_run
from leaderboard.models import ReportSnapshot, ReportUnit
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
from leaderboard.report.registry import reads_declared
from leaderboard.selectors.drilldown import UNIT_COLUMNS, unit_table_get
from leaderboard.selectors.frames import (
    StudyVotes,
    VoteFilters,
    study_judge_sources,
    study_raters_resolve,
    study_votes_get,
)
from leaderboard.selectors.reads import ReadContext
from leaderboard.selectors.section_reads import reads_data_hash, reads_get
from leaderboard.selectors.settings import report_params_for
from leaderboard.selectors.snapshots import (
    report_snapshot_get,
    study_data_fingerprint,
    votes_data_hash,
)
from leaderboard.stats.majority import people_majority

__all__ = ["ReportParams", "agreement_report_build", "agreement_report_snapshot"]

TASK_REPORT_COMPUTE = "leaderboard.report_compute"
# A computation claimed longer ago than this lost its worker; another may claim it.
STALE_COMPUTE = timedelta(minutes=30)
# A recompute queued longer ago than this (its message lost, or its run failed) is queued again.
REQUEUE_AFTER = timedelta(minutes=10)
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


def report_data(*, votes: StudyVotes, reads: Mapping[str, Any], params: ReportParams) -> ReportData:
    """The sections' inputs: the reads' values, the frames by source and the people's majority,
    computed once."""
    frames = {"human": votes.human}
    for source in votes.sources:
        frames[source.name] = rows_of_run(votes.judges, source.run_id)
    return ReportData(
        votes=votes,
        reads=reads,
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
    votes, reads = votes_and_reads_get(study=study, filters=filters)
    return _payload(study=study, votes=votes, filters=filters, params=params, reads=reads)


def votes_and_reads_get(*, study: Study, filters: VoteFilters) -> tuple[StudyVotes, dict[str, Any]]:
    """The votes and every read the registered sections declare (by read key); the reads need
    only the filters, the rater set and the runs, so they are read beside the votes, by
    PostgreSQL in processes of their own (:func:`reads_get`)."""
    ctx = ReadContext(
        study=study,
        filters=filters,
        raters=study_raters_resolve(study=study, raters=filters.raters),
        run_ids=tuple(s.run_id for s in study_judge_sources(study=study, filters=filters)),
    )
    return reads_get(
        reads=reads_declared(),
        ctx=ctx,
        votes=lambda: study_votes_get(study=study, filters=filters),
    )


def report_data_hash(*, votes: StudyVotes, reads: Mapping[str, Any]) -> str:
    """SHA-256 over the votes' hash and the reads' hash (:func:`reads_data_hash`)."""
    both = votes_data_hash(votes=votes) + reads_data_hash(reads)
    return hashlib.sha256(both.encode()).hexdigest()


def report_compute(
    *,
    study: Study,
    votes: StudyVotes,
    filters: VoteFilters,
    params: ReportParams,
    reads: Mapping[str, Any],
) -> Report:
    """The typed report of gathered votes and reads (:func:`votes_and_reads_get`)."""
    data = report_data(votes=votes, reads=reads, params=params)
    # The data hash after the sections, not beside them: a thread of its own never paid
    # (serial / threaded 0.95-1.01 in three runs of benchmarks/bench_report_threads.py).
    results = sections_compute(data)
    data_hash = report_data_hash(votes=votes, reads=reads)
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
    reads: Mapping[str, Any],
) -> dict[str, Any]:
    report = report_compute(study=study, votes=votes, filters=filters, params=params, reads=reads)
    return report_to_payload(report)


@cache
def code_version() -> str:
    """SHA-256 of what a report's numbers depend on besides the data: the schema version,
    Concord's version, the libraries' versions and the source of the report's code (its
    sections, the statistics with `rankeval`'s ranking measures, the reads, this service and the
    judge-kind registry).
    Read once per process. A snapshot computed by other code has another key, so an upgrade
    that fixes a statistic recomputes."""
    digest = hashlib.sha256()
    digest.update(f"{SCHEMA_VERSION}|{software_version()}|".encode())
    digest.update(json.dumps(_library_versions(), sort_keys=True).encode())
    root = Path(settings.BASE_DIR) / "leaderboard"
    files = [
        *sorted((root / "report").glob("*.py")),
        *sorted((root / "stats").glob("*.py")),
        *sorted((root / "selectors").glob("*.py")),
        root / "lookup.py",
        root / "services" / "reports.py",
        # What a kind of judge is, as the report reads it (its order invariance).
        root.parent / "judges" / "kinds.py",
        *sorted((root.parent / "rankeval").glob("*.py")),
    ]
    for path in files:
        digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


Status = Literal["current", "stale", "computing"]


@dataclass(frozen=True)
class ReportState:
    """What the page can show for a key without reading the study's rows.

    current: the stored report was computed from the data as it is now; stale: the data changed
    since (the stored report is shown and a recompute is queued); computing: no report yet (the
    first computation is queued or running; `snapshot.error` says why the last one failed)."""

    snapshot: ReportSnapshot
    status: Status

    @property
    def payload(self) -> dict[str, Any] | None:
        return self.snapshot.payload


def _filters_and_params(stored: Mapping[str, Any]) -> tuple[VoteFilters, ReportParams]:
    """The filters and parameters a snapshot's `params` were written from."""
    filters = dict(stored["filters"])
    runs = filters.get("judge_run_ids")
    filters["judge_run_ids"] = tuple(runs) if runs is not None else None
    rest = {k: v for k, v in stored.items() if k != "filters"}
    return VoteFilters(**filters), ReportParams(**rest)


def report_snapshot_for(
    *, study: Study, filters: VoteFilters, params: ReportParams
) -> ReportSnapshot:
    """The snapshot row of this key (study, filters and parameters, code version), created
    empty when there is none; the unique key makes concurrent requests find the same row."""
    key = params_hash(filters=filters, params=params)
    version = code_version()
    found = report_snapshot_get(study=study, params_hash=key, code_version=version)
    if found is not None:
        return found
    snapshot, _ = ReportSnapshot.objects.get_or_create(
        study=study,
        kind=ReportSnapshot.Kind.AGREEMENT,
        params_hash=key,
        code_version=version,
        defaults={
            "params": to_json(_params_dict(filters, params)),
            "seed": params.seed,
            "software_version": software_version(),
        },
    )
    return snapshot


def _enqueue(snapshot_id: int) -> None:
    try:
        task_send(TASK_REPORT_COMPUTE, args=[snapshot_id], queue=Queue.ANALYSIS)
    except BrokerUnavailable as exc:
        # Not queued: let the next request try again, and say why on the page.
        ReportSnapshot.objects.filter(pk=snapshot_id).update(queued_at=None, error=str(exc))


def report_recompute_queue(*, snapshot: ReportSnapshot) -> bool:
    """Queue the snapshot's computation on the analysis queue, unless one was queued less than
    REQUEUE_AFTER ago (a conditional UPDATE of `queued_at`, so concurrent requests queue it
    once). Return whether this call queued it; the message is sent after commit."""
    now = timezone.now()
    claimed = (
        ReportSnapshot.objects.filter(pk=snapshot.pk)
        .filter(Q(queued_at__isnull=True) | Q(queued_at__lt=now - REQUEUE_AFTER))
        .update(queued_at=now)
    )
    if claimed:
        snapshot_id = snapshot.pk
        transaction.on_commit(lambda: _enqueue(snapshot_id))
    return bool(claimed)


def report_state_get(
    *,
    study: Study,
    filters: VoteFilters,
    params: ReportParams | None = None,
    fingerprint: str | None = None,
) -> ReportState:
    """The page's view of a report: the snapshot of the key and whether it is current, from the
    study's data fingerprint (index lookups; the study's rows are not read; pass it when the
    request read it already). A stale or missing report is queued for the analysis worker.
    Without `params`, the study's report settings (report_params_for)."""
    params = params or report_params_for(study=study)
    fingerprint = fingerprint or study_data_fingerprint(study=study)
    snapshot = report_snapshot_for(study=study, filters=filters, params=params)
    if snapshot.payload is not None and snapshot.fingerprint == fingerprint:
        return ReportState(snapshot, "current")
    if snapshot.computing_since is None and report_recompute_queue(snapshot=snapshot):
        snapshot.refresh_from_db()
    return ReportState(snapshot, "stale" if snapshot.payload is not None else "computing")


# What a "Recompute now" did, for the page to say: queued a computation, found one queued
# already (nothing more queued), or left it to the computation running now (one more follows).
RECOMPUTE_QUEUED = "queued"
RECOMPUTE_ALREADY_QUEUED = "already queued"
RECOMPUTE_AFTER_RUNNING = "after the running computation"


def report_recompute_request(*, study: Study, filters: VoteFilters) -> str:
    """Mark the snapshot of these filters (and the study's report settings) stale and queue its
    computation: for data edited in place, which the fingerprint does not see (an answer's
    text).

    Requests are merged by key, never lost: while a computation is queued, another request
    queues nothing (60 clicks, one task); while one runs, the request only bumps
    `recompute_requests`, and the running computation, seeing the bump when it stores its
    result, leaves the snapshot stale and queues exactly one more (see _compute_into).

    Return which of the three it was (RECOMPUTE_QUEUED, _ALREADY_QUEUED, _AFTER_RUNNING)."""
    params = report_params_for(study=study)
    snapshot = report_snapshot_for(study=study, filters=filters, params=params)
    ReportSnapshot.objects.filter(pk=snapshot.pk).update(
        fingerprint="", recompute_requests=F("recompute_requests") + 1
    )
    # Read after the bump: a computation that ended before it is seen as ended (so this request
    # queues), one that ends after it sees the bump (and queues); both queue through the same
    # conditional UPDATE, so only one of them sends.
    snapshot.refresh_from_db()
    if _computing(snapshot):
        return RECOMPUTE_AFTER_RUNNING
    if report_recompute_queue(snapshot=snapshot):
        return RECOMPUTE_QUEUED
    return RECOMPUTE_ALREADY_QUEUED


def _computing(snapshot: ReportSnapshot) -> bool:
    """Whether a live worker holds the snapshot's computation (a claim older than STALE_COMPUTE
    is taken as a dead worker's)."""
    since = snapshot.computing_since
    return since is not None and since >= timezone.now() - STALE_COMPUTE


def _units_store(snapshot_id: int, rows: list[tuple[Any, ...]]) -> None:
    """Replace the snapshot's drill-down units with `rows` (:func:`unit_table_get`'s), written
    with COPY. Call inside the transaction that wrote the snapshot's payload (which holds the
    snapshot row's lock, so two computations of one key replace the units one after the
    other)."""
    ReportUnit.objects.filter(snapshot_id=snapshot_id).delete()
    statement = pgsql.SQL("COPY {} ({}) FROM STDIN").format(
        pgsql.Identifier(ReportUnit._meta.db_table),
        pgsql.SQL(", ").join(map(pgsql.Identifier, ("snapshot_id", *UNIT_COLUMNS))),
    )
    with connection.cursor() as wrapper, wrapper.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row((snapshot_id, *row))


def _superseded_units_prune(snapshot: ReportSnapshot) -> int:
    """Delete the drill-down units of the snapshots this one supersedes: the same study and
    parameters computed by another code version, which no page reads again (pages find a
    snapshot by the running code's version). Their payloads stay, a few kilobytes each; their
    units are a row per pair. Return how many units went."""
    deleted, _ = (
        ReportUnit.objects.filter(
            snapshot__study_id=snapshot.study_id, snapshot__params_hash=snapshot.params_hash
        )
        .exclude(snapshot__code_version=snapshot.code_version)
        .delete()
    )
    return deleted


def _compute_into(snapshot: ReportSnapshot, *, claim: datetime | None) -> ReportSnapshot:
    """Read the rows, compute the report and store it in the snapshot, with the drill-down's
    units (`ReportUnit`) in the same transaction. The fingerprint is read before the rows, so
    data written during the read makes the snapshot look stale, never current. With a `claim`,
    the result is written only while that claim holds. A recompute requested while it ran
    (`recompute_requests` moved on) leaves the result stored but stale, for the computation
    that request queues."""
    study = snapshot.study
    filters, params = _filters_and_params(snapshot.params)
    requests = snapshot.recompute_requests
    fingerprint = study_data_fingerprint(study=study)
    votes, reads = votes_and_reads_get(study=study, filters=filters)
    report = report_compute(study=study, votes=votes, filters=filters, params=params, reads=reads)
    units = unit_table_get(votes=votes)
    done = ReportSnapshot.objects.filter(pk=snapshot.pk)
    if claim is not None:
        done = done.filter(computing_since=claim)
    with transaction.atomic():
        if _payload_store(done, report=report, requests=requests, fingerprint=fingerprint):
            _units_store(snapshot.pk, units)
            _superseded_units_prune(snapshot)
    snapshot.refresh_from_db()
    return snapshot


def _payload_store(
    done: QuerySet[ReportSnapshot], *, report: Report, requests: int, fingerprint: str
) -> bool:
    """Write the computed report into the snapshot that `done` selects (no row when the claim
    was lost); return whether it did."""
    written = done.update(
        payload=report_to_payload(report),
        data_hash=report.metadata.data_hash,
        # A "Recompute now" asked after this computation began keeps the result stale.
        fingerprint=Case(
            When(recompute_requests=requests, then=Value(fingerprint)), default=Value("")
        ),
        software_version=software_version(),
        computed_at=timezone.now(),
        queued_at=None,
        computing_since=None,
        error="",
    )
    return written == 1


def report_snapshot_compute(*, snapshot_id: int) -> str:
    """The analysis worker's job: compute one snapshot, one worker per key at a time.

    The worker claims the snapshot with a conditional UPDATE of `computing_since` (free, or
    claimed more than STALE_COMPUTE ago by a worker that died); a second delivery while one runs
    does nothing. A snapshot already current is left as it is. A failure is recorded in
    `error` (the page shows it) and raised."""
    now = timezone.now()
    claimed = (
        ReportSnapshot.objects.filter(pk=snapshot_id)
        .filter(Q(computing_since__isnull=True) | Q(computing_since__lt=now - STALE_COMPUTE))
        .update(computing_since=now)
    )
    if not claimed:
        return "busy" if ReportSnapshot.objects.filter(pk=snapshot_id).exists() else "gone"
    snapshot = ReportSnapshot.objects.select_related("study").get(pk=snapshot_id)
    if snapshot.payload is not None and snapshot.fingerprint == study_data_fingerprint(
        study=snapshot.study
    ):
        ReportSnapshot.objects.filter(pk=snapshot_id, computing_since=now).update(
            computing_since=None, queued_at=None
        )
        return "current"
    try:
        snapshot = _compute_into(snapshot, claim=now)
    except Exception as exc:
        ReportSnapshot.objects.filter(pk=snapshot_id, computing_since=now).update(
            computing_since=None, error=failure_reason(exc)
        )
        raise
    if snapshot.fingerprint == "" and snapshot.computing_since is None:
        # A "Recompute now" came while this ran: queue the one computation it asked for.
        report_recompute_queue(snapshot=snapshot)
    return "computed"


def agreement_report_snapshot(
    *,
    study: Study,
    filters: VoteFilters | None = None,
    params: ReportParams | None = None,
    recompute: bool = False,
) -> ReportSnapshot:
    """The snapshot of these parameters, computed here and now when it is not current or
    `recompute` is asked (for the command line, export builds and tests; pages use
    :func:`report_state_get`)."""
    filters = filters or VoteFilters()
    params = params or report_params_for(study=study)
    snapshot = report_snapshot_for(study=study, filters=filters, params=params)
    fingerprint = study_data_fingerprint(study=study)
    if not recompute and snapshot.payload is not None and snapshot.fingerprint == fingerprint:
        return snapshot
    return _compute_into(snapshot, claim=None)


def report_to_json(payload: Mapping[str, Any]) -> bytes:
    """A stored report payload as deterministic JSON bytes."""
    return payload_to_json(payload)


def report_flatten(payload: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """A report payload's leaves as (path, value) pairs, paths as in the JSON, in sorted order
    (the payload of a computed snapshot: None is an error)."""
    return payload_flatten(snapshot_payload_required(payload))


def snapshot_payload_required(payload: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A computed snapshot's payload; ValueError for a snapshot not computed yet."""
    if payload is None:
        raise ValueError("the report snapshot has not been computed yet")
    return payload


def report_to_csv(payload: Mapping[str, Any]) -> bytes:
    """A report payload as CSV bytes: one line per leaf, ``path,value``."""
    return payload_to_csv(payload)
