"""Analysis snapshots: reports computed from raw rows, stored with what they were computed from."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from annotation.models import Study


class ReportSnapshot(models.Model):
    """One computed report. Aggregates are never kept as counters: they are recomputed from the
    raw rows into a snapshot, which records its parameters, seed and a hash of those rows."""

    class Kind(models.TextChoices):
        AGREEMENT = "agreement", "Agreement report"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="report_snapshots")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.AGREEMENT)
    params = models.JSONField(help_text="Filters and statistical parameters, seed included.")
    params_hash = models.CharField(max_length=64, help_text="SHA-256 of the canonical params.")
    seed = models.BigIntegerField()
    data_hash = models.CharField(max_length=64, help_text="SHA-256 of the input rows.")
    software_version = models.CharField(max_length=50)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["study", "kind", "params_hash", "data_hash"], name="snapshot_lookup"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} report on {self.study} ({self.data_hash[:12]})"


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
