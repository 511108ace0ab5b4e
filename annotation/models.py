"""The study data model: what is rated, by whom, and what they said.

Invariants live in the database (unique and check constraints); services add friendly errors on
top but never replace them.
"""

from __future__ import annotations

import random
import secrets
import uuid
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q, Value

FINE_GRAINED_AXES: tuple[str, ...] = ("relevance", "usefulness", "factuality")


# Prolific ids and completion codes travel in URLs: letters, digits, - and _ only.
PANEL_TOKEN_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9_-]*$", "Use letters, digits, - and _ only (it travels in a URL)."
)


def shuffle_key_new() -> float:
    """Return a random sort key for a new pair."""
    return random.random()


# Pair.priority_key of a pair no priority was computed for: below every key a computed
# priority gets (annotation/services/pairs.py, priority_key_draw).
PRIORITY_KEY_NONE = -1e15


def entry_link_key_new() -> str:
    """Return a fresh random key for a study's signed entry link."""
    return secrets.token_hex(16)


class Preference(models.TextChoices):
    """A collapsed preference in canonical (A/B) terms."""

    A = "A", "A is better"
    B = "B", "B is better"
    TIE = "tie", "Tie"


class Acceptability(models.TextChoices):
    ACCEPT = "accept", "Accept"
    REJECT = "reject", "Reject"
    UNSURE = "unsure", "Unsure"


class Study(models.Model):
    """What an admin configures: forms, overlap, pay, time limits, gold share, status."""

    class Selection(models.TextChoices):
        UNIFORM = "uniform", "Uniform"
        ACTIVE = "active", "Active (by priority)"

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        LIVE = "live", "Live"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"

    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    instructions = models.TextField(blank=True, help_text="Markdown shown before work starts.")
    notes = models.TextField(blank=True, help_text="What researchers should know about the data.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)

    form_likert = models.BooleanField("pairwise Likert 1-8", default=True)
    form_values = models.BooleanField("seven values after a preference", default=False)
    form_rationale_only = models.BooleanField("rationale-only (winner shown)", default=False)
    form_acceptability = models.BooleanField("accept / reject / unsure", default=False)
    form_axes = models.BooleanField("relevance, usefulness, factuality", default=False)
    form_comment = models.BooleanField("optional comment", default=True)
    values_required = models.BooleanField(
        "at least one of the seven values",
        default=True,
        help_text="On: a worker who prefers one answer must tick at least one value (the form "
        "says so). Off: the values are optional (the form says to pick all that apply, or none).",
    )

    overlap = models.PositiveSmallIntegerField(
        default=3, help_text="Distinct workers who judge each pair."
    )
    target_per_worker = models.PositiveIntegerField(
        default=20, help_text="Judgments a worker makes before getting a completion code."
    )
    pay_per_judgment_cents = models.PositiveIntegerField(
        default=15, help_text="Pay per accepted judgment, in US cents."
    )
    prolific_reward_cents = models.PositiveIntegerField(
        "Prolific reward",
        null=True,
        blank=True,
        help_text="The reward per submission set on Prolific, in US cents. Empty: the session "
        "pay (target x pay per judgment). The reward pays the judgments up to it; only what it "
        "does not cover (gold bonuses, judgment pay above it) goes into the bonus.",
    )
    hourly_floor_cents = models.PositiveIntegerField(
        default=1200, help_text="Effective hourly pay below which the study raises an alert."
    )
    time_limit_seconds = models.PositiveIntegerField(
        default=600, help_text="How long a reserved pair stays with one worker."
    )
    expected_seconds_per_judgment = models.PositiveIntegerField(
        default=60,
        help_text="How long one judgment takes, by your own trial: the launch checklist checks "
        "the hourly floor and the minutes to give Prolific against it.",
    )
    previewed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When a researcher last previewed the forms; cleared when the forms change.",
    )
    gold_share = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.100"),
        help_text="Share of gold pairs among those a worker is shown (0 to 1).",
    )
    categories = models.JSONField(
        default=list, blank=True, help_text="Categories shown in filters; empty means any."
    )
    selection = models.CharField(
        "pair selection",
        max_length=8,
        choices=Selection.choices,
        default=Selection.UNIFORM,
        db_default=Selection.UNIFORM,
        help_text="Which open pair a worker gets next: uniform (random among the fewest-taken) "
        "or active (pairs drawn by their priority, with a share of uniform draws).",
    )
    uniform_share = models.DecimalField(
        "uniform share of active draws",
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.200"),
        db_default=Decimal("0.200"),
        help_text="With active selection, the share of draws made uniformly at random (above 0, "
        "at most 1), so that every open pair keeps a known chance and estimates stay unbiased.",
    )
    reference_categories = models.JSONField(
        default=list,
        blank=True,
        help_text="Categories whose prompts judges see with a reference answer (MT-Bench's "
        'math, reasoning and coding: ["math", "reasoning", "coding"]); workers never see it.',
    )
    gold_warn_accuracy = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.800"),
        help_text="Gold accuracy below which a worker is warned (0 to 1).",
    )
    gold_block_accuracy = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.600"),
        help_text="Gold accuracy below which a worker gets no more work (0 to 1).",
    )
    gold_min_items = models.PositiveSmallIntegerField(
        default=3, help_text="Gold judgments a worker makes before the thresholds apply."
    )
    qualification_items = models.PositiveSmallIntegerField(
        default=0, help_text="The first items each worker sees are gold (a qualification block)."
    )
    completion_code = models.CharField(
        max_length=60,
        blank=True,
        validators=[PANEL_TOKEN_VALIDATOR],
        help_text="Code the panel expects when a worker reached the target or ran out of work.",
    )
    partial_completion_code = models.CharField(
        max_length=60,
        blank=True,
        validators=[PANEL_TOKEN_VALIDATOR],
        help_text="Code for a worker who stops early (give it its own action on Prolific); "
        "empty shows no code to those who stop early.",
    )
    screened_out_code = models.CharField(
        max_length=60,
        blank=True,
        validators=[PANEL_TOKEN_VALIDATOR],
        help_text="Code for a worker blocked by the gold checks or a researcher (Prolific's "
        "screened-out code); empty shows such workers no code.",
    )
    prolific_study_id = models.CharField(
        "Prolific study id",
        max_length=64,
        blank=True,
        validators=[PANEL_TOKEN_VALIDATOR],
        help_text="The STUDY_ID Prolific sends; Prolific entry is refused until it is set and "
        "refused for any other id.",
    )
    # The study's Prolific API token, pasted by a researcher: Fernet-encrypted (core.secretbox,
    # annotation/services/prolific_connection.py); never shown, logged or exported.
    prolific_token_encrypted = models.TextField(blank=True, editable=False)
    prolific_token_set_at = models.DateTimeField(null=True, blank=True, editable=False)
    prolific_places = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The Prolific study's places, as its API said at the last test of the "
        "connection: entries beyond them are refused.",
    )
    prolific_unverified_max = models.PositiveIntegerField(
        "unverified entries during a Prolific outage",
        default=10,
        validators=[MaxValueValidator(10_000)],
        help_text="With a Prolific token, entrants are checked against Prolific's submissions. "
        "While Prolific cannot answer, up to this many are let in unverified (marked, and "
        "checked later); 0 refuses everyone until Prolific answers.",
    )
    prolific_reconciled_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When the submissions' statuses were last read from Prolific.",
    )
    prolific_auto_approve = models.BooleanField(
        "approve full-code submissions automatically on Prolific",
        default=False,
        help_text="For a draft created from Concord: on, the full completion code's action on "
        "Prolific approves and pays at once (AUTOMATICALLY_APPROVE); off, its submissions wait "
        "for review (MANUALLY_REVIEW) on the workers page. The partial and screened-out codes "
        "always wait for review.",
    )
    # Prolific's status of the linked study (UNPUBLISHED, ACTIVE, PAUSED, AWAITING REVIEW,
    # COMPLETED...), as its API last answered a read, a create or a transition.
    prolific_study_status = models.CharField(max_length=32, blank=True, editable=False)
    # The intent to create a draft on Prolific (services/prolific_study.py), recorded before the
    # call: the key names the draft (its internal_name), so a retry looks it up before creating
    # another; the lease keeps a second click from calling while the first is under way.
    prolific_draft_key = models.CharField(max_length=32, blank=True, editable=False)
    prolific_draft_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    entry_link_required = models.BooleanField(
        "require a signed entry link",
        default=False,
        help_text="Entry needs the study's signed link (its sig parameter); a bare slug URL "
        "is refused.",
    )
    entry_link_key = models.CharField(
        max_length=32,
        default=entry_link_key_new,
        help_text="Part of what the entry link signs: a new key invalidates every old link.",
    )
    entry_attempts_per_minute = models.PositiveIntegerField(
        default=600,
        validators=[MinValueValidator(1), MaxValueValidator(100_000)],
        help_text="Successful entries a minute for the whole study (size it for a launch).",
    )
    invite_valid_days = models.PositiveSmallIntegerField(
        default=14,
        validators=[MinValueValidator(1), MaxValueValidator(365)],
        help_text="Days an invite link stays valid after it was made.",
    )
    links_as_text = models.BooleanField(
        "show links in answers as plain text",
        default=False,
        help_text="Workers see the text of links in answers, not clickable links.",
    )
    completion_url = models.URLField(
        blank=True, help_text="Where a finished worker is sent; empty shows the code instead."
    )
    # Written with the pairs' priorities (pair_priorities_store): the open regular pairs k and
    # their priority sum W at that moment, from which the claim records each active draw's
    # propensity e / k + (1 - e) p / W.
    priority_pool = models.PositiveIntegerField(default=0, db_default=0, editable=False)
    priority_total = models.FloatField(default=0.0, db_default=0.0, editable=False)
    priorities_at = models.DateTimeField(null=True, blank=True, editable=False)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="StudyMembership", related_name="studies", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at"]
        permissions = [
            ("import_study", "Can import prompts and answers into a study"),
            ("export_study", "Can export a study's data and reports"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="study_overlap_at_least_1"),
            models.CheckConstraint(
                condition=Q(gold_share__gte=0) & Q(gold_share__lte=1),
                name="study_gold_share_0_1",
            ),
            models.CheckConstraint(
                condition=Q(pay_per_judgment_cents__gte=0) & Q(hourly_floor_cents__gte=0),
                name="study_pay_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(time_limit_seconds__gte=1), name="study_time_limit_positive"
            ),
            models.CheckConstraint(
                condition=Q(expected_seconds_per_judgment__gte=1),
                name="study_expected_seconds_positive",
            ),
            models.CheckConstraint(
                condition=Q(gold_block_accuracy__gte=0)
                & Q(gold_block_accuracy__lte=F("gold_warn_accuracy"))
                & Q(gold_warn_accuracy__lte=1),
                name="study_gold_thresholds_ordered",
            ),
            models.CheckConstraint(
                condition=Q(partial_completion_code="")
                | ~Q(partial_completion_code=F("completion_code")),
                name="study_partial_code_differs",
            ),
            models.CheckConstraint(
                condition=Q(screened_out_code="")
                | (
                    ~Q(screened_out_code=F("completion_code"))
                    & ~Q(screened_out_code=F("partial_completion_code"))
                ),
                name="study_screened_out_code_differs",
            ),
            models.CheckConstraint(
                condition=Q(entry_attempts_per_minute__gte=1), name="study_entry_limit_positive"
            ),
            models.CheckConstraint(
                condition=Q(invite_valid_days__gte=1), name="study_invite_days_positive"
            ),
            models.CheckConstraint(
                condition=Q(uniform_share__gt=0) & Q(uniform_share__lte=1),
                name="study_uniform_share_0_1",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Check the entry settings together: what a Prolific launch needs to be safe."""
        super().clean()
        errors: dict[str, str] = {}
        if self.partial_completion_code and self.partial_completion_code == self.completion_code:
            errors["partial_completion_code"] = (
                "The partial code must differ from the full completion code, or stopping early "
                "would be paid as finishing."
            )
        if self.screened_out_code and self.screened_out_code in (
            self.completion_code,
            self.partial_completion_code,
        ):
            errors["screened_out_code"] = (
                "The screened-out code must differ from the full and the partial code, or a "
                "blocked worker would be paid as one who finished."
            )
        if self.partial_completion_code and not self.completion_code:
            errors["completion_code"] = "Set the full completion code before the partial one."
        if (
            self.status == Study.Status.LIVE
            and self.entry_link_required
            and not self.entry_link_key
        ):
            errors["entry_link_key"] = "A signed entry link needs a key."
        if errors:
            raise ValidationError(errors)


class StudyMembership(models.Model):
    """A researcher's access to one study; researchers see only studies they belong to."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_memberships"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "user"], name="membership_unique_study_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.study}"


class Prompt(models.Model):
    """A question of one or more user turns."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="prompts")
    external_id = models.CharField(max_length=200)
    category = models.CharField(max_length=100, blank=True, db_index=True)
    turns = models.JSONField(help_text="The user's turns, a list of strings.")
    # A reference answer for reference-guided judges, one string per turn; shown in judge calls'
    # prompts only, never on a worker's page. Frozen once set (annotation.services.references).
    reference_turns = models.JSONField(null=True, blank=True)
    reference_source = models.CharField(
        max_length=120,
        blank=True,
        # A database default too, so that rows written by plain SQL (bulk loaders, the
        # fingerprint test's filler, benchmarks) need not name it.
        db_default="",
        help_text='Where the reference came from: "imported", or "judge:<name>" for one a '
        "reference judge wrote.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study_id", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "external_id"], name="prompt_unique_external_id"
            )
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def turn_count(self) -> int:
        return len(self.turns or [])


class System(models.Model):
    """A model that answers prompts: name, version and decoding parameters."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100, blank=True)
    decoding = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study_id", "name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "name", "version"], name="system_unique_name_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()


class Answer(models.Model):
    """A system's answer to a prompt: one text per user turn.

    `turns` may be empty when the source published labels but no texts (MT-Bench's judgments).
    """

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="answers")
    # Looked up through answer_system_id, which leads with the system.
    system = models.ForeignKey(
        System, on_delete=models.CASCADE, related_name="answers", db_index=False
    )
    turns = models.JSONField(default=list, blank=True)
    rank = models.PositiveIntegerField(null=True, blank=True, help_text="1 = best.")
    upvotes = models.IntegerField(null=True, blank=True)
    leak_matches = models.JSONField(
        default=list, blank=True, help_text="Phrases in which the model names itself or its maker."
    )
    leak_flagged = models.BooleanField(default=False, db_index=True)
    leak_cleared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # When and by whom a flag was reviewed (the names are older than the remedies).
    leak_cleared_at = models.DateTimeField(null=True, blank=True)

    class LeakRemedy(models.TextChoices):
        """What a researcher decided for a flagged answer."""

        CLEARED = "cleared", "Cleared: the phrase does not give the system away"
        EXCLUDED = "excluded", "Left out of pairs"
        EDITED = "edited", "Edited: workers read the edited text"
        NOTED = "noted", "Kept as it is, with a note: workers read the name"

    leak_remedy = models.CharField(max_length=8, choices=LeakRemedy.choices, blank=True)
    leak_note = models.TextField(blank=True)
    # The imported turns of an edited answer; `turns` then holds what workers and judges read.
    original_turns = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["prompt_id", "system_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "system"], name="answer_unique_prompt_system"
            ),
            models.CheckConstraint(condition=Q(rank__gte=1), name="answer_rank_from_1"),
            # A review has a remedy, and a remedy a review.
            models.CheckConstraint(
                condition=Q(leak_cleared_at__isnull=True, leak_remedy="")
                | (Q(leak_cleared_at__isnull=False) & ~Q(leak_remedy="")),
                name="answer_leak_remedy_reviewed",
            ),
            # Only an edited answer keeps an original, and it always does.
            models.CheckConstraint(
                condition=Q(original_turns__isnull=True) & ~Q(leak_remedy="edited")
                | Q(original_turns__isnull=False, leak_remedy="edited"),
                name="answer_original_iff_edited",
            ),
        ]
        indexes = [
            # The data fingerprint's latest answer of a study: one backward step per system of
            # the study, whatever other studies hold (selectors/snapshots.py in leaderboard).
            models.Index(fields=["system", "id"], name="answer_system_id"),
        ]

    def __str__(self) -> str:
        return f"{self.system} on {self.prompt}"

    @property
    def text(self) -> str:
        """The whole answer, turns joined by blank lines."""
        return "\n\n".join(self.turns or [])

    @property
    def usable_in_pairs(self) -> bool:
        """Flagged answers stay out of pairs until a researcher reviews them, and for good when
        the remedy is to leave them out."""
        if not self.leak_flagged:
            return True
        return self.leak_cleared_at is not None and self.leak_remedy != self.LeakRemedy.EXCLUDED


# Flagged answers that wait for a researcher's review.
LEAK_PENDING = Q(leak_flagged=True, leak_cleared_at__isnull=True)


class ContrastSet(models.Model):
    """A study's Contrast Instructions for one seed: pairs of prompts with similar questions.

    Built by a judges service (which owns the sentence encoder) and stored here so that every
    judge and every person is measured on the same set. `best` says how each prompt's best answer
    was chosen; `system` is set exactly when it is a named system's answer.
    """

    class Best(models.TextChoices):
        FIRST_RANKED = "first_ranked", "The first-ranked answer"
        MAJORITY = "majority", "The people's majority winner"
        SYSTEM = "system", "A named system's answer"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="contrast_sets")
    seed = models.IntegerField(default=0)
    low = models.FloatField(help_text="Lowest cosine of the two questions.")
    high = models.FloatField(help_text="Highest cosine of the two questions.")
    best = models.CharField(max_length=12, choices=Best.choices)
    system = models.ForeignKey(
        System, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    backbone = models.CharField(max_length=300, help_text="The sentence encoder of the questions.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study_id", "seed"]
        constraints = [
            models.UniqueConstraint(fields=["study", "seed"], name="contrast_set_unique_seed"),
            models.CheckConstraint(
                condition=Q(low__gte=-1, high__lte=1, low__lte=F("high")),
                name="contrast_set_window",
            ),
            models.CheckConstraint(
                condition=Q(best="system", system__isnull=False)
                | (~Q(best="system") & Q(system__isnull=True)),
                name="contrast_set_system_iff_named",
            ),
        ]

    def __str__(self) -> str:
        return f"contrast set {self.study.slug} seed {self.seed}"


class ContrastPair(models.Model):
    """Two prompts of a contrast set (prompt_a.id < prompt_b.id) with their best answers.

    `answer_a` belongs to `prompt_a` and `answer_b` to `prompt_b` (the storing service checks it);
    each prompt is in at most one pair of a set.
    """

    contrast_set = models.ForeignKey(ContrastSet, on_delete=models.CASCADE, related_name="pairs")
    prompt_a = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="+")
    prompt_b = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="+")
    answer_a = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="+")
    answer_b = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="+")
    similarity = models.FloatField(help_text="Cosine of the two questions' embeddings.")

    class Meta:
        ordering = ["contrast_set_id", "prompt_a_id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(prompt_a__lt=F("prompt_b")), name="contrast_pair_canonical_order"
            ),
            models.UniqueConstraint(
                fields=["contrast_set", "prompt_a"], name="contrast_pair_prompt_a_once"
            ),
            models.UniqueConstraint(
                fields=["contrast_set", "prompt_b"], name="contrast_pair_prompt_b_once"
            ),
        ]

    def __str__(self) -> str:
        return f"contrast pair {self.pk} (prompts {self.prompt_a_id}, {self.prompt_b_id})"


class Pair(models.Model):
    """Two answers to the same prompt in canonical order (answer_a.id < answer_b.id), one turn.

    A pair at a turn is the agreement unit: (prompt, unordered pair of answers, turn). A contrast
    item (source "contrast", `contrast` set) is the one exception: it shows one prompt of a
    contrast pair with both prompts' best answers, at turn 1, and is never gold.
    """

    class Source(models.TextChoices):
        ALL_PAIRS = "all_pairs", "All system pairs"
        BASELINE = "baseline", "Against a baseline"
        SAMPLE = "sample", "Sampled"
        GOLD = "gold", "Gold from a ranking"
        IMPORTED = "imported", "Imported"
        CONTRAST = "contrast", "Contrast instructions"

    class GoldKind(models.TextChoices):
        NONE = "", "Not gold"
        FIRST_VS_LAST = "first_vs_last", "First vs last ranked"
        FIRST_VS_SECOND = "first_vs_second", "First vs second ranked"

    # Looked up through pair_study_id and the other indexes that lead with the study.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pairs", db_index=False)
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="pairs")
    answer_a = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="pairs_as_a")
    answer_b = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="pairs_as_b")
    turn = models.PositiveSmallIntegerField(default=1)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.ALL_PAIRS)
    is_gold = models.BooleanField(default=False, db_index=True)
    gold_side = models.CharField(max_length=3, choices=Preference.choices, blank=True)
    gold_kind = models.CharField(max_length=20, choices=GoldKind.choices, blank=True)
    rationale_winner = models.CharField(
        max_length=3,
        choices=[(Preference.A, Preference.A.label), (Preference.B, Preference.B.label)],
        blank=True,
        db_default="",
        help_text="The side a rationale-only form shows as better, when not from gold or ranks.",
    )
    # Set on contrast items only: the prompt shown is one of the contrast pair's, the answers are
    # the pair's two best answers (one of them to another prompt).
    contrast = models.ForeignKey(
        ContrastPair, null=True, blank=True, on_delete=models.CASCADE, related_name="items"
    )
    # A random key fixed at creation: the claim walks pairs in this order from a random start, so
    # "random among equals" never sorts the whole pool.
    shuffle_key = models.FloatField(default=shuffle_key_new, editable=False)
    # Active selection (Study.selection): the pair's priority in [0, 1], recomputed by the
    # analysis worker (leaderboard/services/priority.py), and its Efraimidis-Spirakis key
    # ln(u) / priority, redrawn at each recompute, so that walking the pairs by key, highest
    # first, draws them with probability proportional to priority
    # (annotation/services/priority.py). A pair never scored has priority 0 and the lowest key.
    priority = models.FloatField(default=0.0, db_default=0.0, editable=False)
    priority_key = models.FloatField(
        default=PRIORITY_KEY_NONE, db_default=PRIORITY_KEY_NONE, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study_id", "prompt_id", "turn", "answer_a_id", "answer_b_id"]
        constraints = [
            # The prompt is part of the key because a contrast item shows the same two answers
            # under each of the pair's two prompts; for every other pair the answers belong to
            # the prompt, so this is as strict as (answer_a, answer_b, turn).
            models.UniqueConstraint(
                fields=["prompt", "answer_a", "answer_b", "turn"],
                name="pair_unique_prompt_answers_turn",
            ),
            models.CheckConstraint(
                condition=Q(source="contrast", contrast__isnull=False, is_gold=False, turn=1)
                | (~Q(source="contrast") & Q(contrast__isnull=True)),
                name="pair_contrast_item_has_pair",
            ),
            models.CheckConstraint(
                condition=Q(answer_a__lt=F("answer_b")), name="pair_canonical_order"
            ),
            models.CheckConstraint(condition=Q(turn__gte=1), name="pair_turn_from_1"),
            models.CheckConstraint(
                condition=(Q(is_gold=False, gold_side="", gold_kind=""))
                | (Q(is_gold=True) & Q(gold_side__in=["A", "B"]) & ~Q(gold_kind="")),
                name="pair_gold_has_side",
            ),
            models.CheckConstraint(
                condition=Q(rationale_winner__in=["", "A", "B"]), name="pair_rationale_winner_a_b"
            ),
        ]
        indexes = [
            # The data fingerprint's latest pair of a study: one backward step, however many
            # pairs other studies added after it (selectors/snapshots.py in leaderboard).
            models.Index(fields=["study", "id"], name="pair_study_id"),
            models.Index(fields=["study", "is_gold"], name="pair_study_gold"),
            models.Index(
                fields=["study", "is_gold", "shuffle_key"], name="pair_study_gold_shuffle"
            ),
            models.Index(
                "study", "is_gold", F("priority_key").desc(), name="pair_study_gold_priority"
            ),
        ]

    def __str__(self) -> str:
        return f"pair {self.pk} ({self.prompt}, turn {self.turn})"


class Worker(models.Model):
    """Someone who rates pairs in one study: a crowd worker, or an outside rater whose published
    judgments were imported (then `user` is empty and `external_id` is the rater's id)."""

    class Panel(models.TextChoices):
        INVITE = "invite", "Invite link"
        PROLIFIC = "prolific", "Prolific"
        DEMO = "demo", "Demo"
        IMPORTED = "imported", "Imported rater"

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        WARNED = "warned", "Warned"
        BLOCKED = "blocked", "Blocked"
        DONE = "done", "Done"
        RETURNED = "returned", "Returned"

    # Looked up through worker_study_excluded and the constraints below, which lead with it.
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, related_name="workers", db_index=False
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="worker_profiles",
    )
    panel = models.CharField(max_length=12, choices=Panel.choices)
    external_id = models.CharField(max_length=200, help_text="Participant id on the panel.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    panel_session_id = models.CharField(
        max_length=200, blank=True, help_text="The panel's own session id (Prolific SESSION_ID)."
    )

    class Verification(models.TextChoices):
        NONE = "", "not checked (no Prolific token)"
        VERIFIED = "verified", "a submission of the Prolific study"
        UNVERIFIED = "unverified", "let in during a Prolific outage, not yet checked"

    prolific_verification = models.CharField(
        max_length=10,
        choices=Verification.choices,
        default=Verification.NONE,
        blank=True,
        help_text="Whether Prolific confirmed this SESSION_ID as a submission of the study for "
        "this PROLIFIC_PID.",
    )
    prolific_status = models.CharField(
        max_length=32,
        blank=True,
        help_text="The participant's submission status on Prolific (ACTIVE, AWAITING REVIEW, "
        "APPROVED, REJECTED, RETURNED, TIMED-OUT...) at the last read; empty: never read.",
    )
    prolific_status_at = models.DateTimeField(null=True, blank=True)
    prolific_return_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="When Concord asked Prolific to ask them to return it."
    )
    session_key = models.CharField(
        max_length=40, blank=True, help_text="The server-side session this worker is bound to."
    )
    last_seen_at = models.DateTimeField(null=True, blank=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    finished_full = models.BooleanField(
        default=False,
        help_text="Finished at the study's target or when no work was left for them: earns the "
        "full completion code; stopping earlier earns the partial code.",
    )
    state_reason = models.TextField(blank=True, help_text="Why the state was last changed.")
    excluded = models.BooleanField(
        default=False,
        help_text="Excluded from analysis and pay (with all their judgments).",
    )
    excluded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study_id", "panel", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "panel", "external_id"], name="worker_unique_external_id"
            ),
            models.UniqueConstraint(
                fields=["study", "user"],
                condition=Q(user__isnull=False),
                name="worker_unique_user_per_study",
            ),
        ]
        indexes = [
            # The data fingerprint counts a study's excluded workers and reads their latest
            # exclusion from this, without visiting the others (leaderboard selectors/snapshots).
            models.Index(fields=["study", "excluded", "excluded_at"], name="worker_study_excluded"),
        ]

    def __str__(self) -> str:
        return f"{self.panel}:{self.external_id}"


class Assignment(models.Model):
    """One pair reserved for one worker, with the order in which it is shown."""

    class Status(models.TextChoices):
        RESERVED = "reserved", "Reserved"
        SUBMITTED = "submitted", "Submitted"
        EXPIRED = "expired", "Expired"
        RETURNED = "returned", "Returned"
        SKIPPED = "skipped", "Skipped"

    class SkipReason(models.TextChoices):
        """Why a worker skipped an item, as the skip button offers them."""

        CANNOT_JUDGE = "cannot_judge", "I can't judge this one (outside what I know)"
        BROKEN = "broken", "An answer or the question does not display properly"
        LANGUAGE = "language", "It is in a language I don't read well"
        OTHER = "other", "Another reason"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    # The pair's and the worker's lookups are served by the composite indexes below, which lead
    # with them; each index of its own would only be one more to write on every claim and submit.
    pair = models.ForeignKey(
        Pair, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    worker = models.ForeignKey(
        Worker, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    a_left = models.BooleanField(help_text="True when answer A is shown on the left.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RESERVED)
    reserved_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    # A skipped item is never paid and frees its slot: the claim counts only reserved and
    # submitted assignments, and never offers a worker a pair they had before. A default in the
    # database too: the claim function inserts assignments without naming this column.
    skip_reason = models.CharField(
        max_length=12, choices=SkipReason.choices, blank=True, default="", db_default=""
    )
    skipped_at = models.DateTimeField(null=True, blank=True)
    # Active selection: the probability that the claim's draw took this pair, e / k + (1 - e) p / W
    # with the study's uniform share e, the pair's priority p and the pool k and priority total W
    # of the last recompute (annotation/sql/annotation_claim_propensity.sql). Empty for uniform
    # studies, gold pairs and active studies before their first priorities: uniform draws.
    propensity = models.FloatField(null=True, blank=True, editable=False)
    # The recompute that propensity came from (the study's priorities_at when the pair was
    # served, read in the same statement as its k and W), so a vote's weight can be traced to
    # the priorities in force when it was drawn. Empty without a propensity, and on the
    # assignments drawn before it was recorded (annotation 0029).
    priorities_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-reserved_at"]
        constraints = [
            # Pair first: the claim counts a pair's taken slots through this index.
            models.UniqueConstraint(
                fields=["pair", "worker"],
                condition=Q(status__in=["reserved", "submitted"]),
                name="assignment_one_open_per_worker_pair",
            ),
            models.CheckConstraint(
                condition=Q(status="skipped", skipped_at__isnull=False) & ~Q(skip_reason="")
                | (~Q(status="skipped") & Q(skip_reason="", skipped_at__isnull=True)),
                name="assignment_skip_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("reserved_at")), name="assignment_expiry_after_start"
            ),
            models.CheckConstraint(
                condition=Q(propensity__isnull=True) | (Q(propensity__gt=0) & Q(propensity__lte=1)),
                name="assignment_propensity_0_1",
            ),
            models.CheckConstraint(
                condition=Q(priorities_at__isnull=True) | Q(propensity__isnull=False),
                name="assignment_recompute_has_propensity",
            ),
        ]
        indexes = [
            models.Index(fields=["pair", "status"], name="assignment_pair_status"),
            models.Index(fields=["worker", "pair"], name="assignment_worker_pair"),
            # Open reservations only (a handful of rows whatever the study's size): a worker's
            # open reservation, and the sweep of those past their expiry.
            models.Index(
                fields=["worker", "expires_at"],
                condition=Q(status="reserved"),
                name="assignment_worker_reserved",
            ),
        ]

    def __str__(self) -> str:
        return str(self.public_id)


class HumanJudgment(models.Model):
    """A person's answer to the forms for one pair.

    Live judgments belong to an assignment and store the Likert score as shown and in canonical
    A/B terms. Imported judgments (published data) have no assignment, may carry only a collapsed
    preference, and may not know the order shown: those fields stay empty rather than invented.
    """

    # The study's lookups are served by judgment_study_pair, which leads with it.
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, related_name="judgments", db_index=False
    )
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="judgments")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="judgments")
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.CASCADE, related_name="judgment"
    )
    submission_id = models.UUIDField(
        null=True, blank=True, unique=True, help_text="Idempotency key sent with the form."
    )
    is_imported = models.BooleanField(default=False)
    a_left = models.BooleanField(null=True, blank=True, help_text="Empty when not known.")
    likert_shown = models.PositiveSmallIntegerField(null=True, blank=True)
    likert = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Canonical, 1-8.")
    preference = models.CharField(max_length=3, choices=Preference.choices, blank=True)
    values = models.JSONField(default=list, blank=True, help_text="Seven-value keys cited.")
    reason = models.TextField(blank=True)
    acceptability_a = models.CharField(max_length=6, choices=Acceptability.choices, blank=True)
    acceptability_b = models.CharField(max_length=6, choices=Acceptability.choices, blank=True)
    axes = models.JSONField(
        default=dict, blank=True, help_text='{"a": {"relevance": "yes", ...}, "b": {...}}'
    )
    comment = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Server-measured.")
    # The analysis reads only rows with excluded = False; set with the worker's exclusion.
    excluded = models.BooleanField(
        default=False, help_text="Left out of the analysis and pay (the worker was excluded)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(likert_shown__isnull=True)
                | (Q(likert_shown__gte=1) & Q(likert_shown__lte=8)),
                name="judgment_likert_shown_1_8",
            ),
            models.CheckConstraint(
                condition=Q(likert__isnull=True) | (Q(likert__gte=1) & Q(likert__lte=8)),
                name="judgment_likert_1_8",
            ),
            # The canonical score follows from the shown score and the order: 9 - shown when B
            # was on the left.
            models.CheckConstraint(
                condition=Q(likert_shown__isnull=True)
                | Q(a_left=True, likert=F("likert_shown"))
                | Q(a_left=False, likert=Value(9) - F("likert_shown")),
                name="judgment_likert_canonical",
            ),
            # The collapsed preference follows from the canonical score: 1-3 A, 4-5 tie, 6-8 B.
            models.CheckConstraint(
                condition=Q(likert__isnull=True)
                | Q(likert__lte=3, preference="A")
                | Q(likert__in=[4, 5], preference="tie")
                | Q(likert__gte=6, preference="B"),
                name="judgment_preference_matches_likert",
            ),
            models.CheckConstraint(
                condition=Q(is_imported=True) | Q(assignment__isnull=False),
                name="judgment_live_has_assignment",
            ),
        ]
        indexes = [
            models.Index(fields=["study", "pair"], name="judgment_study_pair"),
            # The data fingerprint's latest judgment of a study in one backward step.
            models.Index(fields=["study", "id"], name="judgment_study_id"),
        ]

    def __str__(self) -> str:
        return f"judgment {self.pk} on {self.pair_id}"


class PayEntry(models.Model):
    """A line of the payment ledger: pay for one accepted judgment, or a bonus."""

    class Kind(models.TextChoices):
        JUDGMENT = "judgment", "Judgment"
        BONUS = "bonus", "Bonus"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        PAID = "paid", "Paid"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pay_entries")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="pay_entries")
    # Looked up by pay_once_per_judgment, which leads with it.
    judgment = models.ForeignKey(
        HumanJudgment,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="pay_entries",
        db_index=False,
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    amount_cents = models.IntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "pay entries"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(amount_cents__gte=0), name="pay_non_negative"),
            models.UniqueConstraint(
                fields=["judgment", "kind"],
                condition=Q(judgment__isnull=False),
                name="pay_once_per_judgment",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount_cents}c to {self.worker}"


class EntryLog(models.Model):
    """One attempt to enter a study from a panel link, let in or refused, and why.

    `client_key` is a keyed hash of the client's address (never the address itself): enough to
    see many participant ids arriving from one place, nothing a reader can turn back into an IP.
    """

    class Outcome(models.TextChoices):
        ENTERED = "entered", "Entered"
        REFUSED = "refused", "Refused"
        TAKEOVER_REFUSED = "takeover", "Rebinding refused"
        RATE_LIMITED = "limited", "Rate limited"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="entry_logs")
    worker = models.ForeignKey(
        Worker, null=True, blank=True, on_delete=models.SET_NULL, related_name="entry_logs"
    )
    panel = models.CharField(max_length=12, choices=Worker.Panel.choices)
    external_id = models.CharField(max_length=200, blank=True)
    panel_session_id = models.CharField(max_length=200, blank=True)
    panel_study_id = models.CharField(max_length=200, blank=True)
    client_key = models.CharField(max_length=64, db_index=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["study", "client_key"], name="entrylog_study_client")]

    def __str__(self) -> str:
        return f"{self.outcome} {self.panel}:{self.external_id}"


class ProlificBonusBatch(models.Model):
    """One bulk bonus payment through Prolific's API: set up once, paid at most once.

    Prolific's pay call (POST /api/v1/bulk-bonus-payments/{id}/pay/) is not idempotent: a second
    call pays everyone again. So a batch moves only forward, by conditional UPDATEs that claim it
    with a lease (services/prolific_bonus.py): pending -> creating -> created (Prolific's batch id
    recorded) -> paying -> paid. A batch found in `paying` after its lease ran out, or whose pay
    call failed without a clear "not paid", becomes `uncertain` ("possibly paid: check
    Prolific") and is never paid again by Concord; a researcher settles it.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting to be set up on Prolific"
        CREATING = "creating", "being set up on Prolific"
        CREATED = "created", "set up on Prolific, not paid yet"
        PAYING = "paying", "being paid"
        PAID = "paid", "paid"
        UNCERTAIN = "uncertain", "possibly paid: check Prolific"
        FAILED = "failed", "not paid"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="bonus_batches")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    total_cents = models.PositiveIntegerField()
    prolific_batch_id = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One batch on its way at a time per study: two could each send the same bonus.
            models.UniqueConstraint(
                fields=["study"],
                condition=Q(status__in=["pending", "creating", "created", "paying"]),
                name="bonus_batch_one_open_per_study",
            ),
        ]

    def __str__(self) -> str:
        return f"bonus batch {self.pk} ({self.status})"


class ProlificBonusLine(models.Model):
    """One participant's bonus in a batch; counts as already sent unless the batch failed."""

    batch = models.ForeignKey(ProlificBonusBatch, on_delete=models.CASCADE, related_name="lines")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="bonus_lines")
    amount_cents = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "worker"], name="bonus_line_once_per_batch"),
            models.CheckConstraint(condition=Q(amount_cents__gt=0), name="bonus_line_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.amount_cents}c to worker {self.worker_id}"


class RowDeletions(models.Model):
    """How many DELETE statements removed rows of one annotation table the report's data
    fingerprint reads (annotation_pair, annotation_answer, annotation_humanjudgment).

    Kept by the statement-level triggers annotation/sql/annotation_*_deletions.sql through
    annotation/sql/annotation_count_deletions.sql, which create a table's row at its first
    deletion; the fingerprint (leaderboard/selectors/snapshots.py) reads it. Made by migration
    annotation/0009 in SQL, so Django does not manage the table: read it, never write it.
    """

    table_name = models.TextField(primary_key=True)
    deletions = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "annotation_rowdeletions"
        verbose_name_plural = "row deletions"

    def __str__(self) -> str:
        return f"{self.table_name}: {self.deletions} deletions"
