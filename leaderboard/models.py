"""Analysis snapshots: reports computed from raw rows, stored with what they were computed from."""

from __future__ import annotations

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
