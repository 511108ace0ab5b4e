"""Judges, judge runs and judge calls: one shape for live judges and imported verdicts."""

from __future__ import annotations

import hashlib
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotation.models import Answer, ContrastSet, Pair, Preference, Prompt, Study


class OutputFormat(models.TextChoices):
    """What a prompt template asks the judge to write (see judges.llm.prompts)."""

    LIKERT = "likert", "Likert 1-8 on the first line"
    TWO_SCORES = "two_scores", "Two scores 1-10"
    VERDICT = "verdict", "Verdict [[A]] / [[B]] / [[C]]"
    VALUES = "values", "Winner and seven values"
    GRADE = "grade", "One grade 1-10 for a single answer"


def template_hash(
    template: str, reference_template: str = "", multi_turn_template: str = ""
) -> str:
    """Return the SHA-256 of a prompt template, so a report can say exactly what was asked.

    A reference-guided judge's hash covers its reference template too (after a NUL byte), and a
    judge with a multi-turn template that one as well (after a second NUL byte); a judge without
    them keeps the hash of its template alone.
    """
    text = template if not reference_template else f"{template}\0{reference_template}"
    if multi_turn_template:
        text = f"{template}\0{reference_template}\0{multi_turn_template}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Turns(models.TextChoices):
    """Which turns of a multi-turn prompt a judge judges for each pair of its run."""

    PAIR = "pair", "The pair's turn"
    EACH = "each", "Every turn of the prompt"


class Judge(models.Model):
    """A configured automatic rater."""

    class Kind(models.TextChoices):
        LLM = "llm", "LLM chat judge"
        PL = "pl", "Plackett-Luce reward model"
        RANDOM = "random", "Baseline: random"
        LONGER = "longer", "Baseline: prefer the longer answer"
        IMPORTED = "imported", "Imported verdicts"
        PANEL = "panel", "Panel of judges (jury)"

    class PanelRule(models.TextChoices):
        MAJORITY = "majority", "Majority of the members' verdicts"
        MEAN_LIKERT = "mean_likert", "Mean of the members' Likert scores"
        WEIGHTED = "weighted", "Weighted mean of the members' Likert scores"

    class OrderPolicy(models.TextChoices):
        BOTH = "both", "Both orders"
        RANDOM = "random", "One random order"
        FIXED = "fixed", "Fixed (A first)"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    study = models.ForeignKey(
        Study,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judges",
        help_text="The study a researcher made this judge in (only its members see it); empty "
        "for a judge an admin made for every study.",
    )
    model_name = models.CharField(max_length=200, blank=True)
    model_version = models.CharField(max_length=100, blank=True)
    base_url = models.URLField(blank=True, help_text="OpenAI-compatible API base URL.")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable that holds the key (never the key itself).",
    )
    # A key pasted in the researcher's page, Fernet-encrypted with a key derived from SECRET_KEY
    # (judges.services.keys); never shown, logged or exported. Used instead of api_key_env.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    api_key_set_at = models.DateTimeField(null=True, blank=True, editable=False)
    prompt_template = models.TextField(
        blank=True,
        help_text="Variables: {question}, {answer_first}, {answer_second}, {turn}, {values}.",
    )
    output_format = models.CharField(
        max_length=12,
        choices=OutputFormat.choices,
        default=OutputFormat.LIKERT,
        help_text="What the template asks for; decides how replies are parsed.",
    )
    reference_template = models.TextField(
        blank=True,
        help_text="Used instead of the prompt template for prompts in the study's reference "
        "categories (Study.reference_categories); shows the prompt's reference answer as "
        "{reference}. Empty: the judge is not reference-guided.",
    )
    multi_turn_template = models.TextField(
        blank=True,
        help_text="Used instead of the prompt template for calls that judge turn 2 or later of "
        "a multi-turn prompt; shows the whole conversation up to the judged turn as "
        "{conversation} and asks about that turn's replies. Empty: later turns use the prompt "
        "template, whose {question} and answers then hold every turn up to the judged one.",
    )
    turns = models.CharField(
        max_length=4,
        choices=Turns.choices,
        default=Turns.PAIR,
        help_text="The pair's turn: one call per pair and order, at the turn the pair is at "
        "(what people judged). Every turn: also a call at each other turn of the prompt, so a "
        "2-turn prompt's pair is judged at turn 1 and at turn 2.",
    )
    template_hash = models.CharField(max_length=64, blank=True, editable=False)
    params = models.JSONField(
        default=dict, blank=True, help_text='For example {"temperature": 0, "max_tokens": 512}.'
    )
    price_input_per_mtok = models.DecimalField(
        "price per million input tokens (USD)", max_digits=10, decimal_places=4, default=Decimal(0)
    )
    price_output_per_mtok = models.DecimalField(
        "price per million output tokens (USD)", max_digits=10, decimal_places=4, default=Decimal(0)
    )
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    order_policy = models.CharField(
        max_length=10, choices=OrderPolicy.choices, default=OrderPolicy.BOTH
    )
    order_invariant = models.BooleanField(
        default=False,
        help_text="True when the verdict cannot depend on the order shown (a reward model scores "
        "each answer alone), so there is no position bias to measure.",
    )
    panel_rule = models.CharField(
        max_length=12,
        choices=PanelRule.choices,
        blank=True,
        help_text="A panel's rule for combining its members' verdicts (judges.services.panels); "
        "empty for every other kind.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(price_input_per_mtok__gte=0) & Q(price_output_per_mtok__gte=0),
                name="judge_prices_non_negative",
            )
        ]

    def __str__(self) -> str:
        return self.name


class PanelMember(models.Model):
    """One judge on a panel (a jury, judges.services.panels), with its weight in the panel's
    weighted mean (1 under the other rules)."""

    panel = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="panel_members")
    member = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="panel_memberships")
    weight = models.DecimalField(max_digits=8, decimal_places=4, default=Decimal(1))
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["panel_id", "position", "member_id"]
        constraints = [
            models.UniqueConstraint(fields=["panel", "member"], name="panel_member_unique"),
            models.CheckConstraint(condition=Q(weight__gt=0), name="panel_member_weight_positive"),
            models.CheckConstraint(condition=~Q(panel=F("member")), name="panel_member_not_itself"),
        ]

    def __str__(self) -> str:
        return f"{self.member} on {self.panel} (weight {self.weight})"


class JudgeRun(models.Model):
    """One judge over a set of pairs of one study."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        CANCELLED = "cancelled", "Cancelled"
        BUDGET_REACHED = "budget", "Stopped at budget"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        IMPORTED = "imported", "Imported"

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="runs")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_runs")
    pairs = models.ManyToManyField(Pair, related_name="judge_runs", blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    budget_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="Empty: no cap."
    )
    seed = models.BigIntegerField(default=0)
    # The judge's turns option when the run started (its calls were made by it).
    turns = models.CharField(max_length=4, choices=Turns.choices, default=Turns.PAIR)
    note = models.TextField(blank=True)
    # The budget's running total, written in the same transaction as each call's cost (so it can
    # never drift from the rows), so that checking the budget before a call is one row read.
    spent_usd = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal(0))
    # Estimated price of requests that may have been paid without their reply being recorded
    # (a worker killed mid-request, a reply lost with its database connection); the budget counts
    # it. The count is the sum of the calls' `unrecorded_requests`.
    exposure_usd = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal(0))
    # Why the run's calls cannot make progress (the rate limiter's Redis unreachable, the broker
    # down), and since when; cleared when a call of the run is recorded again.
    stall_reason = models.TextField(blank=True)
    stall_since = models.DateTimeField(null=True, blank=True)
    # A PL run's scoring (judges.reward.scoring): the worker that claims it holds a lease, which
    # its heartbeat renews, and writes only while the row carries its token; the reconciler
    # re-queues a pending run whose lease ran out (its worker died), up to
    # CONCORD_REWARD_SCORE_MAX_ATTEMPTS claims, then fails it with the reason in `note`.
    score_attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    score_lease_token = models.CharField(max_length=32, blank=True, default="", db_default="")
    score_lease_expires_at = models.DateTimeField(null=True, blank=True)
    score_heartbeat_at = models.DateTimeField(null=True, blank=True)
    score_requeued_at = models.DateTimeField(
        null=True, blank=True, help_text="When the reconciler last queued the scoring again."
    )
    # When the scoring's message was last sent (start, resume, the reconciler): a pending run no
    # worker claimed for CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS after it lost its message, and
    # the reconciler sends another (counted in `score_resends`, the last at `score_resent_at`).
    score_queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When the scoring's message was last sent."
    )
    score_resent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the reconciler last sent again a message that no worker had claimed.",
    )
    score_resends = models.PositiveSmallIntegerField(default=0, db_default=0)
    # A panel run's member runs, whose calls its derived calls combine and whose costs are its
    # cost in the report (judges.services.panels).
    panel_sources = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="panel_runs"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(budget_usd__isnull=True) | Q(budget_usd__gte=0),
                name="run_budget_non_negative",
            )
        ]

    def __str__(self) -> str:
        return f"{self.judge} on {self.study} (#{self.pk})"


class JudgeCall(models.Model):
    """One judge on one pair in one order at one turn. Never made or paid twice: unique per
    (run, pair, order, turn).

    `turn` is the turn the call judged, on every call: a pair call's is its pair's turn (filled
    in by the database when an insert leaves it out: judges/sql/judges_call_turn_from_pair.sql),
    or, for a judge that judges every turn (Judge.turns ``each``), any turn of the prompt; the
    report compares people, who judged the pair at its turn, with the calls at that turn only.

    `order` records what the judge was shown: A first, B first, or `both` for a verdict that a
    source combined from both orders (MT-Bench's published GPT-4 pair verdicts).

    A *grade call* of a single-answer grading judge (output format ``grade``) is one judge on one
    answer alone at one turn: `answer` and `turn` set, `pair` empty, order ``one``, the grade in
    `grade`; unique per (run, answer, turn). Its run's pair verdicts are derived from two grades
    (judges.services.grading) and are ordinary pair calls.
    """

    class Order(models.TextChoices):
        A_FIRST = "ab", "A shown first"
        B_FIRST = "ba", "B shown first"
        BOTH = "both", "Combined from both orders"
        ONE = "one", "One answer alone"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="calls")
    pair = models.ForeignKey(
        Pair, null=True, blank=True, on_delete=models.CASCADE, related_name="judge_calls"
    )
    answer = models.ForeignKey(
        Answer,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="grade_calls",
        help_text="A grade call's answer (its pair is empty).",
    )
    # NOT NULL (judges 0015): an insert without it (a pair call) gets its pair's turn from the
    # trigger judges_judgecall_turn_from_pair, so every call says which turn it judged.
    turn = models.PositiveSmallIntegerField(
        blank=True,
        help_text="The judged turn, from 1: a pair call's pair's turn unless its judge judges "
        "every turn; a grade call's turn.",
    )
    order = models.CharField(max_length=4, choices=Order.choices)
    status = models.CharField(
        max_length=8, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    request = models.JSONField(default=dict, blank=True, help_text="The prompt as sent.")
    raw_output = models.TextField(blank=True)
    likert_shown = models.PositiveSmallIntegerField(null=True, blank=True)
    likert = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Canonical, 1-8.")
    preference = models.CharField(max_length=3, choices=Preference.choices, blank=True)
    verdict_label = models.CharField(
        max_length=50, blank=True, help_text="The verdict as the source wrote it."
    )
    score_a = models.FloatField(null=True, blank=True)
    score_b = models.FloatField(null=True, blank=True)
    values = models.JSONField(default=list, blank=True)
    grade = models.FloatField(null=True, blank=True, help_text="A grade call's grade, 1-10.")
    parse_error = models.TextField(blank=True)
    refusal = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    # Every attempt's error, oldest first, kept when the call is retried and when it is done at
    # last: [{"attempt": n, "at": ISO time, "error": text}] (`error` holds only the latest).
    attempt_errors = models.JSONField(default=list, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=8, default=Decimal(0))
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    model_version_reported = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # Running: when the worker's claim runs out. Pending: when the reconciler may send it again.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Set by each claim; a worker writes to the call only while the row still carries its token.
    lease_token = models.CharField(max_length=32, blank=True)
    # No claim before this time (the API's Retry-After, or the backoff after a transient error).
    not_before = models.DateTimeField(null=True, blank=True)
    # Requests sent for this call whose reply was never recorded: each may have been paid.
    unrecorded_requests = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # By column, not by relation: following Pair's own ordering through both answers makes
        # Django report an ordering loop.
        ordering = ["run_id", "pair_id", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "pair", "order", "turn"], name="call_unique_run_pair_order_turn"
            ),
            models.UniqueConstraint(
                fields=["run", "answer", "turn"],
                condition=Q(answer__isnull=False),
                name="call_unique_run_answer_turn",
            ),
            # A pair call or a grade call, never both nor neither.
            models.CheckConstraint(
                condition=(Q(pair__isnull=False, answer__isnull=True) & ~Q(order="one"))
                | Q(pair__isnull=True, answer__isnull=False, order="one"),
                name="call_pair_or_answer_v2",
            ),
            models.CheckConstraint(condition=Q(turn__gte=1), name="call_turn_from_1"),
            models.CheckConstraint(
                condition=Q(grade__isnull=True) | (Q(grade__gte=1) & Q(grade__lte=10)),
                name="call_grade_1_10",
            ),
            models.CheckConstraint(
                condition=Q(likert__isnull=True) | (Q(likert__gte=1) & Q(likert__lte=8)),
                name="call_likert_1_8",
            ),
            models.CheckConstraint(
                condition=Q(likert_shown__isnull=True)
                | (Q(likert_shown__gte=1) & Q(likert_shown__lte=8)),
                name="call_likert_shown_1_8",
            ),
            models.CheckConstraint(condition=Q(cost_usd__gte=0), name="call_cost_non_negative"),
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="call_run_status"),
            # The report's data fingerprint reads each run's latest call and latest finished
            # call from these (one backward index step per run).
            models.Index(fields=["run", "finished_at"], name="call_run_finished"),
            models.Index(fields=["run", "id"], name="call_run_id"),
        ]

    def __str__(self) -> str:
        return f"call {self.pk} ({self.order})"


class ReferenceCall(models.Model):
    """One reference judge asked for one prompt's reference answer: the ledger of what writing
    references cost (judges.services.references). Unique per (judge, prompt): whatever the
    retries, a prompt is asked of a judge on one row, whose tokens and cost sum every reply that
    came back (a refused or empty reply was paid too), and a done row is never asked again.

    Not a JudgeCall: those judge a pair or an answer (call_pair_or_answer_v2) within a run. The
    report counts these costs in the cost of every run whose judge reads the references
    (leaderboard.selectors.section_reads.report_costs_get). `request` is the request as sent
    (without the key); `stored` says whether the reply became the prompt's reference (False
    when another writer, or an import, set one first). Like a judge call, a running row is held
    by the worker whose `lease_token` it carries until `lease_expires_at`; `unrecorded_requests`
    counts the requests that may have been paid without their reply being recorded.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    # Read through reference_call_study_id and reference_call_study_finished, which lead with it.
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, related_name="reference_calls", db_index=False
    )
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="reference_calls")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="reference_calls")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    # The Idempotency-Key of its requests: kept while no reply came back (a gateway that saw the
    # request answers the resend from its cache), new after a reply that was refused or empty.
    idempotency_key = models.CharField(max_length=100, unique=True)
    request = models.JSONField(default=dict, blank=True, help_text="The request as sent.")
    reply = models.TextField(blank=True)
    stored = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=8, default=Decimal(0))
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    model_version_reported = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    unrecorded_requests = models.PositiveSmallIntegerField(default=0)
    lease_token = models.CharField(max_length=32, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study_id", "prompt_id", "judge_id"]
        constraints = [
            models.UniqueConstraint(fields=["judge", "prompt"], name="reference_call_unique"),
            models.CheckConstraint(
                condition=Q(cost_usd__gte=0), name="reference_call_cost_non_negative"
            ),
        ]
        indexes = [
            # The data fingerprint's latest reference call and latest finished one of a study.
            models.Index(fields=["study", "id"], name="reference_call_study_id"),
            models.Index(fields=["study", "finished_at"], name="reference_call_study_finished"),
        ]

    def __str__(self) -> str:
        return f"reference call {self.pk} ({self.status})"


class AnswerScore(models.Model):
    """A reward model's score of one answer in one run; pair verdicts derive from two scores."""

    # Looked up through score_run_id and score_unique_run_answer, which lead with the run.
    run = models.ForeignKey(
        JudgeRun, on_delete=models.CASCADE, related_name="answer_scores", db_index=False
    )
    answer = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="scores")
    score = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "answer"], name="score_unique_run_answer")
        ]
        indexes = [
            # The data fingerprint's latest score of each run in one backward step.
            models.Index(fields=["run", "id"], name="score_run_id"),
        ]

    def __str__(self) -> str:
        return f"{self.answer} = {self.score:.3f}"


class ContrastScoring(models.Model):
    """A PL run's scoring of one contrast set: everything model-dependent that the report's
    consistency section needs, computed once by the reward_model worker
    (judges.reward.contrast), so that the report only reads (leaderboard.selectors.contrast).

    Unique per (run, contrast set): a scoring is stored at most once; a done row is never
    computed again, a failed one (`error` says why) is tried again by the next request. The
    arrays are stored losslessly as `.npy` bytes (dtype and shape in their header;
    judges.reward.arrays), so that RewardFusion recomputed from them gives the
    numbers bit for bit:

    - `scores`: float64 [4 * pairs], h(I_A, r_A), h(I_A, r_B), h(I_B, r_A), h(I_B, r_B) of each
      contrast pair in the set's pair order (ContrastPair id);
    - `query_vectors`: the embeddings of those four "question\n\nanswer" texts, [4 * pairs, d];
    - `answer_ids`: int64 [n], the run's scored answers (AnswerScore) in id order, and
      `answer_vectors` [n, d] the embeddings of their "question\n\nanswer" texts.

    `backbone` is the encoder that embedded them and `temperature` the artifact's fitted T
    (1.0 when uncalibrated). Like a reference call, a running row is held by the worker whose
    `lease_token` it carries until `lease_expires_at`; after that another request takes it.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    # Looked up through contrast_scoring_unique, which leads with the run.
    run = models.ForeignKey(
        JudgeRun, on_delete=models.CASCADE, related_name="contrast_scorings", db_index=False
    )
    contrast_set = models.ForeignKey(ContrastSet, on_delete=models.CASCADE, related_name="scorings")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    backbone = models.CharField(max_length=300, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    pairs = models.PositiveIntegerField(default=0, help_text="Contrast pairs scored.")
    scores = models.BinaryField(default=b"", blank=True)
    query_vectors = models.BinaryField(default=b"", blank=True)
    answer_ids = models.BinaryField(default=b"", blank=True)
    answer_vectors = models.BinaryField(default=b"", blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_token = models.CharField(max_length=32, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "contrast_set"], name="contrast_scoring_unique"),
            models.CheckConstraint(
                condition=~Q(status="done") | Q(finished_at__isnull=False, temperature__gt=0),
                name="contrast_scoring_done_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"contrast scoring of run {self.run_id}, set {self.contrast_set_id} ({self.status})"


class PLTraining(models.Model):
    """One training of a Plackett-Luce reward model on a study's ranked lists or human labels.

    `params` holds every setting (recipe, K, data sources, tie rule, backbone, epochs, ...); the
    worker writes `epoch`, `curve` and `heartbeat_at` as it trains. The judge exists only once
    the training is done: the artifact folder is complete before the judge row and the done
    status are written in one transaction, so a killed worker never leaves a half-registered
    model (the constraint below says done if and only if a judge is set).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        CANCELLED = "cancelled", "Cancelled"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pl_trainings")
    name = models.CharField(max_length=100, help_text="The name the trained judge will have.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    params = models.JSONField(default=dict)
    seed = models.BigIntegerField(default=0)
    epochs = models.PositiveIntegerField(default=0)
    epoch = models.PositiveIntegerField(default=0)
    curve = models.JSONField(default=list, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    data_summary = models.JSONField(default=dict, blank=True)
    data_hash = models.CharField(max_length=64, blank=True)
    held_out_prompts = models.JSONField(
        null=True,
        blank=True,
        help_text="Ids of the study's prompts held out of training (the split by prompt with "
        "the seed and params['holdout']); set when done, null where not known.",
    )
    artifact = models.CharField(max_length=200, blank=True, help_text="Folder under artifacts.")
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the training's message was last sent (start, retry, the reconciler): a pending
    # training no worker claimed for CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS after it lost
    # its message, and the reconciler sends another (counted in `resends`, the last at
    # `resent_at`; judges.reward.resend).
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When the training's message was last sent."
    )
    resent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the reconciler last sent again a message that no worker had claimed.",
    )
    resends = models.PositiveSmallIntegerField(default=0, db_default=0)
    judge = models.OneToOneField(
        Judge, null=True, blank=True, on_delete=models.PROTECT, related_name="pl_training"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status="done", judge__isnull=False)
                | (~Q(status="done") & Q(judge__isnull=True)),
                name="pltraining_done_iff_judge",
            ),
            models.CheckConstraint(condition=Q(epoch__lte=F("epochs")), name="pltraining_epoch_le"),
        ]

    def __str__(self) -> str:
        return f"PL training {self.pk} ({self.name})"

    @property
    def is_terminal(self) -> bool:
        return self.status in (self.Status.CANCELLED, self.Status.DONE, self.Status.FAILED)

    @property
    def recipe_name(self) -> str:
        """The recipe and K by the answers they count ("PL pairwise, top 3 + last")."""
        from judges.reward.losses import recipe_name

        return recipe_name(str(self.params.get("recipe", "?")), self.params.get("k"))


class RowDeletions(models.Model):
    """How many DELETE statements removed rows of one judges table the report's data fingerprint
    reads (judges_judgecall, judges_answerscore).

    Kept by the statement-level triggers judges/sql/judges_*_deletions.sql through
    judges/sql/judges_count_deletions.sql, which create a table's row at its first deletion; the
    fingerprint (leaderboard/selectors/snapshots.py) reads it. Made by migration judges/0007 in
    SQL, so Django does not manage the table: read it, never write it.
    """

    table_name = models.TextField(primary_key=True)
    deletions = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "judges_rowdeletions"
        verbose_name_plural = "row deletions"

    def __str__(self) -> str:
        return f"{self.table_name}: {self.deletions} deletions"
