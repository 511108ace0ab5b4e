"""Analysis snapshots: reports computed from raw rows, stored with what they were computed from."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from annotation.models import Pair, Study
from judges.models import JudgeRun


class ReportSnapshot(models.Model):
    """One study's report for one set of filters and parameters, as computed by one version of
    the code. Aggregates are never kept as counters: the analysis worker recomputes the report
    from the raw rows into the snapshot, which records its parameters, seed, a hash of those
    rows (`data_hash`) and a cheap fingerprint of the study's data (`fingerprint`) at the time it
    read them, so that a page can tell whether the stored report is current without reading rows.

    At most one snapshot per (study, kind, params_hash, code_version). `payload` is empty until
    the first computation ends. `queued_at` is set (conditional UPDATE) when a recompute is
    queued and `computing_since` when a worker starts one (conditional UPDATE, so that one key is
    computed by one worker at a time); both are cleared when it ends. `recompute_requests`
    counts the researcher's "Recompute now" requests, so that one asked while a computation
    reads the rows is not lost when that computation stores its result.
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
    recompute_requests = models.PositiveIntegerField(
        default=0,
        help_text="Bumped by each Recompute now; a computation that started before the last "
        "bump leaves the snapshot stale and queues one more.",
    )
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


class ReportUnit(models.Model):
    """One agreement unit of a snapshot as the drill-down lists it: the people's votes by label,
    their majority and each judge source's vote, written by the analysis worker with the
    snapshot's payload (the rows of :func:`leaderboard.selectors.drilldown.unit_rows_get`), so
    that the unit list pages through them in SQL rather than reading the study's votes in the
    request. Replaced as a whole, under the snapshot row's lock, each time the snapshot is
    computed; a unit with no human vote has an empty `majority`."""

    # Keyed by (snapshot, pair) alone, and the pair's id kept without a foreign key: a snapshot
    # of a large study stores hundreds of thousands of units each time it is computed, and each
    # index or constraint checked per row costs the analysis worker time; the snapshot's own
    # data fingerprint, not a constraint, says when a unit's pair has gone.
    pk = models.CompositePrimaryKey("snapshot_id", "pair_id")
    snapshot = models.ForeignKey(
        ReportSnapshot, on_delete=models.CASCADE, related_name="units", db_index=False
    )
    pair_id = models.BigIntegerField()
    prompt = models.TextField(help_text="The prompt's external id.")
    category = models.TextField(blank=True)
    turn = models.PositiveSmallIntegerField()
    system_a = models.TextField()
    system_b = models.TextField()
    human_a = models.PositiveIntegerField()
    human_b = models.PositiveIntegerField()
    human_tie = models.PositiveIntegerField()
    majority = models.CharField(max_length=3, blank=True)
    judges = models.JSONField(
        default=dict, help_text="Each judge source's vote (A, B or tie), for those that voted."
    )

    def __str__(self) -> str:
        return f"unit {self.pair_id} of snapshot {self.snapshot_id}"


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


class Followup(models.Model):
    """Where a follow-up rationale-only study came from: the study and the two judge runs whose
    disagreements it samples, and which of them had to agree with the known better side.

    Written once, with the follow-up's pairs, by `leaderboard.services.followup`; the follow-up
    study's report reads it to split the people's values by `FollowupPair.agreed` (AdvisorQA's
    Fig. 4). The runs' names are kept as text, so that the split still names them when a run or
    the source study is deleted.
    """

    class Agreeing(models.TextChoices):
        ANY = "any", "Any disagreement"
        FIRST = "first", "The first run agreed with the better side"
        SECOND = "second", "The second run agreed with the better side"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="followup_origin")
    source_study = models.ForeignKey(
        Study, null=True, on_delete=models.SET_NULL, related_name="followups"
    )
    first_run = models.ForeignKey(JudgeRun, null=True, on_delete=models.SET_NULL, related_name="+")
    second_run = models.ForeignKey(JudgeRun, null=True, on_delete=models.SET_NULL, related_name="+")
    first_label = models.CharField(max_length=300, help_text="The first run's judge and run id.")
    second_label = models.CharField(max_length=300, help_text="The second run's judge and run id.")
    agreeing = models.CharField(max_length=6, choices=Agreeing.choices, default=Agreeing.ANY)
    sample_size = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    candidates = models.PositiveIntegerField(help_text="Disagreements the sample was drawn from.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(agreeing__in=["any", "first", "second"]),
                name="followup_agreeing_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(study=models.F("source_study")), name="followup_not_itself"
            ),
        ]

    def __str__(self) -> str:
        return f"follow-up {self.study} of {self.first_label} vs {self.second_label}"


class FollowupPair(models.Model):
    """One pair of a follow-up study: the pair it copies, where its better side is known from,
    the two runs' votes, and which run voted the better side (`agreed`). The votes differ, so at
    most one run agreed; `neither` is a pair where one run voted a tie and the other the worse
    side."""

    class Basis(models.TextChoices):
        GOLD = "gold", "The gold side"
        RANKS = "ranks", "The answers' ranks"
        SET = "set", "The pair's own shown winner"
        PEOPLE = "people", "The people's decisive majority"

    class Agreed(models.TextChoices):
        FIRST = "first", "The first run"
        SECOND = "second", "The second run"
        NEITHER = "neither", "Neither run"

    followup = models.ForeignKey(Followup, on_delete=models.CASCADE, related_name="pairs")
    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, related_name="followup_link")
    source_pair = models.ForeignKey(Pair, null=True, on_delete=models.SET_NULL, related_name="+")
    basis = models.CharField(max_length=6, choices=Basis.choices)
    agreed = models.CharField(max_length=7, choices=Agreed.choices)
    first_vote = models.CharField(max_length=3, help_text="A, B or tie, in the copy's terms.")
    second_vote = models.CharField(max_length=3, help_text="A, B or tie, in the copy's terms.")

    class Meta:
        ordering = ["followup_id", "pair_id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(basis__in=["gold", "ranks", "set", "people"]),
                name="followuppair_basis_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(agreed__in=["first", "second", "neither"]),
                name="followuppair_agreed_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(first_vote__in=["A", "B", "tie"])
                & models.Q(second_vote__in=["A", "B", "tie"])
                & ~models.Q(first_vote=models.F("second_vote")),
                name="followuppair_votes_differ",
            ),
        ]

    def __str__(self) -> str:
        return f"follow-up pair {self.pair_id} (copy of {self.source_pair_id})"


class ReportSettings(models.Model):
    """A study's own report parameters, which its pages, API, exports and recomputes use: the
    baseline system of the length-controlled win rates ("" = the system in the most pairs) and
    the price of the PL judge's compute per 1,000 pairs (0 = not priced). Each change is a new
    report key (the parameters are in the snapshot's params hash), so the report of the new
    settings is computed by the analysis worker while the old one is still shown. No row: the
    defaults of ReportParams."""

    study = models.OneToOneField(
        Study, on_delete=models.CASCADE, primary_key=True, related_name="report_settings"
    )
    baseline = models.CharField(
        max_length=200,
        blank=True,
        help_text="System the length-controlled win rates compare every model with; empty: the "
        "system in the most pairs.",
    )
    pl_usd_per_1000 = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=0,
        help_text="USD per 1,000 pairs scored by a PL reward model (its compute); 0: not priced.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(pl_usd_per_1000__gte=0),
                name="report_settings_price_not_negative",
            )
        ]

    def __str__(self) -> str:
        return f"report settings of {self.study}"
