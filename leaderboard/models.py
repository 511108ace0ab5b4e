"""Analysis snapshots: reports computed from raw rows, stored with what they were computed from."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from annotation.models import Study


class ReportSnapshot(models.Model):
    """One study's report for one set of filters and parameters, as computed by one version of
    the code. Aggregates are never kept as counters: the analysis worker recomputes the report
    from the raw rows into the snapshot, which records its parameters, seed, a hash of those
    rows (`data_hash`) and a cheap fingerprint of the study's data (`fingerprint`) at the time it
    read them, so that a page can tell whether the stored report is current without reading rows.

    At most one snapshot per (study, kind, params_hash, code_version). `payload` is empty until
    the first computation ends. `queued_at` is set (conditional UPDATE) when a recompute is
    queued and `computing_since` when a worker starts one (conditional UPDATE, so that one key is
    computed by one worker at a time); both are cleared when it ends.
    """

    class Kind(models.TextChoices):
        AGREEMENT = "agreement", "Agreement report"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="report_snapshots")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.AGREEMENT)
    params = models.JSONField(help_text="Filters and statistical parameters, seed included.")
    params_hash = models.CharField(max_length=64, help_text="SHA-256 of the canonical params.")
    code_version = models.CharField(
        max_length=64, default="", help_text="SHA-256 of the report code and library versions."
    )
    seed = models.BigIntegerField()
    data_hash = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the rows read.")
    fingerprint = models.CharField(
        max_length=64, blank=True, help_text="The study's data fingerprint when the rows were read."
    )
    software_version = models.CharField(max_length=50)
    payload = models.JSONField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    computing_since = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why the last computation failed.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "kind", "params_hash", "code_version"], name="snapshot_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} report on {self.study} ({self.params_hash[:12]})"


class ExportJob(models.Model):
    """One export of a study's rows built in the background into a file under the exports dir.

    Status moves pending -> running -> done or failed, each step a conditional UPDATE on the old
    status, so a redelivered task never redoes a finished job; a done job whose file outlived
    CONCORD_EXPORT_KEEP_DAYS becomes expired (file deleted) by `export_jobs_maintain`.
    `public_id` names the job in URLs and `file_name` carries a random token: neither can be
    guessed from a study or a job number.
    """

    class Kind(models.TextChoices):
        PAIRS = "pairs", "Pairs"
        JUDGMENTS = "judgments", "Human judgments"
        CALLS = "calls", "Judge calls"
        REPORT = "report", "Agreement report"

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        JSONL = "jsonl", "JSON Lines"
        PARQUET = "parquet", "Parquet"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        EXPIRED = "expired", "Expired (file deleted)"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="export_jobs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    format = models.CharField(max_length=8, choices=Format.choices)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    file_name = models.CharField(
        max_length=200, blank=True, help_text="Relative to the exports directory; set when done."
    )
    rows = models.BigIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Builds started: a worker that stopped mid-build leaves one behind."
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=["pairs", "judgments", "calls", "report"]),
                name="exportjob_kind_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(format__in=["csv", "jsonl", "parquet"]),
                name="exportjob_format_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["pending", "running", "done", "failed", "expired"]),
                name="exportjob_status_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(status="done") | ~models.Q(file_name=""),
                name="exportjob_done_has_file",
            ),
            models.CheckConstraint(
                condition=models.Q(rows__isnull=True) | models.Q(rows__gte=0),
                name="exportjob_rows_non_negative",
            ),
        ]
        indexes = [models.Index(fields=["study", "-created_at"], name="exportjob_study_recent")]

    def __str__(self) -> str:
        return f"{self.kind}.{self.format} export of {self.study} ({self.status})"
