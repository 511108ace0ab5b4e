"""Django admin for the annotation app: where an admin configures studies and looks at raw rows.

Lists annotate their counts in the one list query (no query per row) and select the related rows
they show. Actions call services; the admin holds no rules of its own.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.db.models import Count, IntegerField, Model, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from annotation.models import (
    Answer,
    Assignment,
    HumanJudgment,
    Pair,
    PayEntry,
    Prompt,
    Study,
    StudyMembership,
    System,
    Worker,
)
from annotation.services.leaks import answers_leak_clear
from annotation.services.studies import studies_status_set
from annotation.services.workers import workers_block, workers_unblock


def count_of(model: type[Model], field: str) -> Coalesce:
    """A correlated subquery counting `model` rows whose `field` points at the outer row.

    Used instead of several Count() joins on one list, which would multiply rows.
    """
    rows = (
        model._default_manager.filter(**{field: OuterRef("pk")})
        .order_by()
        .values(field)
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), Value(0))


def annotated(obj: Model, name: str) -> int:
    """An integer the list query annotated onto the row."""
    return int(getattr(obj, name, 0) or 0)


def dollars(cents: int | None) -> str:
    return "-" if cents is None else f"${cents / 100:,.2f}"


class StudyMembershipInline(admin.TabularInline):
    model = StudyMembership
    extra = 0
    raw_id_fields = ("user",)
    readonly_fields = ("created_at",)
    verbose_name = "researcher with access"
    verbose_name_plural = "researchers with access"


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "slug",
        "status",
        "prompt_count",
        "pair_count",
        "judgment_count",
        "pay_display",
        "overlap",
        "gold_share",
    )
    list_filter = ("status",)
    search_fields = ("slug", "name")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("pay_display", "hourly_floor_display", "created_at", "updated_at")
    inlines = (StudyMembershipInline,)
    actions = ("make_live", "make_paused", "make_closed")
    fieldsets = (
        ("Basics", {"fields": ("slug", "name", "status", "description", "instructions", "notes")}),
        (
            "Forms shown",
            {
                "fields": (
                    "form_likert",
                    "form_values",
                    "form_rationale_only",
                    "form_acceptability",
                    "form_axes",
                    "form_comment",
                )
            },
        ),
        (
            "Workload",
            {"fields": ("overlap", "target_per_worker", "time_limit_seconds", "gold_share")},
        ),
        (
            "Pay",
            {
                "fields": (
                    "pay_per_judgment_cents",
                    "pay_display",
                    "hourly_floor_cents",
                    "hourly_floor_display",
                ),
                "description": "Amounts are stored in US cents; the $ lines show the saved value.",
            },
        ),
        ("Categories", {"fields": ("categories", "reference_categories")}),
        ("Record", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Study]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                prompt_count=count_of(Prompt, "study"),
                pair_count=count_of(Pair, "study"),
                judgment_count=count_of(HumanJudgment, "study"),
            )
        )

    def get_form(
        self, request: HttpRequest, obj: Any | None = None, change: bool = False, **kwargs: Any
    ) -> type[ModelForm[Any]]:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.base_fields[
            "pay_per_judgment_cents"
        ].help_text = (
            "Pay per accepted judgment, in US cents (15 = $0.15). Rejected judgments earn nothing."
        )
        form.base_fields["hourly_floor_cents"].help_text = (
            "Effective hourly pay, in US cents, below which the study raises an alert "
            "(1200 = $12.00 an hour)."
        )
        return form

    @admin.display(description="prompts", ordering="prompt_count")
    def prompt_count(self, obj: Study) -> int:
        return annotated(obj, "prompt_count")

    @admin.display(description="pairs", ordering="pair_count")
    def pair_count(self, obj: Study) -> int:
        return annotated(obj, "pair_count")

    @admin.display(description="judgments", ordering="judgment_count")
    def judgment_count(self, obj: Study) -> int:
        return annotated(obj, "judgment_count")

    @admin.display(description="pay in $", ordering="pay_per_judgment_cents")
    def pay_display(self, obj: Study) -> str:
        return dollars(obj.pay_per_judgment_cents)

    @admin.display(description="hourly floor in $")
    def hourly_floor_display(self, obj: Study) -> str:
        return dollars(obj.hourly_floor_cents)

    def _status_set(self, request: HttpRequest, queryset: QuerySet[Study], status: str) -> None:
        moved = studies_status_set(studies=queryset, status=Study.Status(status))
        label = Study.Status(status).label.lower()
        self.message_user(request, f"{moved} of {queryset.count()} studies set to {label}.")
        if moved < queryset.count():
            self.message_user(
                request,
                "Studies already there, or closed, were left as they were.",
                level=messages.WARNING,
            )

    @admin.action(description="Set selected studies live", permissions=["change"])
    def make_live(self, request: HttpRequest, queryset: QuerySet[Study]) -> None:
        self._status_set(request, queryset, Study.Status.LIVE)

    @admin.action(description="Pause selected studies", permissions=["change"])
    def make_paused(self, request: HttpRequest, queryset: QuerySet[Study]) -> None:
        self._status_set(request, queryset, Study.Status.PAUSED)

    @admin.action(description="Close selected studies", permissions=["change"])
    def make_closed(self, request: HttpRequest, queryset: QuerySet[Study]) -> None:
        self._status_set(request, queryset, Study.Status.CLOSED)


@admin.register(Prompt)
class PromptAdmin(admin.ModelAdmin):
    # Lists order by ids and plain fields: the models' Meta.ordering follows foreign keys
    # into many joins.
    ordering = ("study_id", "external_id")
    list_display = ("external_id", "study", "category", "turn_count", "answer_count")
    list_filter = ("study", "category")
    list_select_related = ("study",)
    search_fields = ("external_id", "turns")
    raw_id_fields = ("study",)
    readonly_fields = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Prompt]:
        return super().get_queryset(request).annotate(answer_count=Count("answers"))

    @admin.display(description="turns")
    def turn_count(self, obj: Prompt) -> int:
        return obj.turn_count

    @admin.display(description="answers", ordering="answer_count")
    def answer_count(self, obj: Prompt) -> int:
        return annotated(obj, "answer_count")


@admin.register(System)
class SystemAdmin(admin.ModelAdmin):
    ordering = ("study_id", "name", "version")
    list_display = ("name", "version", "study", "answer_count")
    list_filter = ("study",)
    list_select_related = ("study",)
    search_fields = ("name", "version")
    readonly_fields = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[System]:
        return super().get_queryset(request).annotate(answer_count=Count("answers"))

    @admin.display(description="answers", ordering="answer_count")
    def answer_count(self, obj: System) -> int:
        return annotated(obj, "answer_count")


@admin.register(Answer)
class AnswerAdmin(admin.ModelAdmin):
    ordering = ("-pk",)
    list_display = (
        "pk",
        "prompt",
        "system",
        "study",
        "rank",
        "upvotes",
        "leak_flagged",
        "leak_cleared_at",
    )
    list_filter = ("prompt__study", "system", "leak_flagged")
    list_select_related = ("prompt__study", "system")
    search_fields = ("turns", "prompt__external_id")
    raw_id_fields = ("prompt", "system")
    readonly_fields = ("leak_matches", "leak_cleared_by", "leak_cleared_at", "created_at")
    actions = ("clear_leak_flag",)

    @admin.display(description="study", ordering="prompt__study__name")
    def study(self, obj: Answer) -> Study:
        return obj.prompt.study

    @admin.action(description="Clear the identity-leak flag", permissions=["change"])
    def clear_leak_flag(self, request: HttpRequest, queryset: QuerySet[Answer]) -> None:
        assert isinstance(request.user, User)
        cleared = answers_leak_clear(answers=queryset, user=request.user)
        self.message_user(
            request,
            f"Cleared {cleared} flagged answers; they can now be paired. "
            "Answers not flagged or already cleared were left as they were.",
        )


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin):
    ordering = ("-pk",)
    list_display = (
        "pk",
        "study",
        "prompt",
        "turn",
        "system_a",
        "system_b",
        "source",
        "is_gold",
        "gold_side",
        "judgment_count",
    )
    list_filter = ("study", "source", "is_gold", "turn")
    list_select_related = ("study", "prompt", "answer_a__system", "answer_b__system")
    search_fields = ("prompt__external_id",)
    raw_id_fields = ("study", "prompt", "answer_a", "answer_b")
    readonly_fields = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Pair]:
        return (
            super().get_queryset(request).annotate(judgment_count=count_of(HumanJudgment, "pair"))
        )

    @admin.display(description="system A", ordering="answer_a__system__name")
    def system_a(self, obj: Pair) -> System:
        return obj.answer_a.system

    @admin.display(description="system B", ordering="answer_b__system__name")
    def system_b(self, obj: Pair) -> System:
        return obj.answer_b.system

    @admin.display(description="judgments", ordering="judgment_count")
    def judgment_count(self, obj: Pair) -> int:
        return annotated(obj, "judgment_count")


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    ordering = ("study_id", "panel", "external_id")
    list_display = ("external_id", "panel", "study", "user", "state", "judgment_count")
    list_filter = ("study", "panel", "state")
    list_select_related = ("study", "user")
    search_fields = ("external_id", "user__username")
    raw_id_fields = ("study", "user")
    readonly_fields = ("created_at",)
    actions = ("block", "unblock")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        return super().get_queryset(request).annotate(judgment_count=Count("judgments"))

    @admin.display(description="judgments", ordering="judgment_count")
    def judgment_count(self, obj: Worker) -> int:
        return annotated(obj, "judgment_count")

    @admin.action(description="Block selected workers", permissions=["change"])
    def block(self, request: HttpRequest, queryset: QuerySet[Worker]) -> None:
        self.message_user(request, f"Blocked {workers_block(workers=queryset)} workers.")

    @admin.action(description="Unblock selected workers", permissions=["change"])
    def unblock(self, request: HttpRequest, queryset: QuerySet[Worker]) -> None:
        self.message_user(request, f"Unblocked {workers_unblock(workers=queryset)} workers.")


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    """Assignments come from the claim flow; here they are read, and at most given a status."""

    list_display = (
        "public_id",
        "study",
        "pair_id",
        "worker",
        "a_left",
        "status",
        "reserved_at",
        "expires_at",
        "submitted_at",
    )
    list_filter = ("status", "study")
    list_select_related = ("study", "worker")
    search_fields = ("public_id", "worker__external_id")
    readonly_fields = (
        "public_id",
        "study",
        "pair",
        "worker",
        "a_left",
        "reserved_at",
        "expires_at",
        "submitted_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(HumanJudgment)
class HumanJudgmentAdmin(admin.ModelAdmin):
    """Judgments are the record: readable here, never edited."""

    list_display = (
        "pk",
        "study",
        "pair_id",
        "worker",
        "is_imported",
        "a_left",
        "likert_shown",
        "likert",
        "preference",
        "duration_ms",
        "created_at",
    )
    list_filter = ("study", "is_imported", "preference")
    list_select_related = ("study", "worker")
    search_fields = ("worker__external_id", "reason", "comment")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: HumanJudgment | None = None) -> bool:
        return False


@admin.register(PayEntry)
class PayEntryAdmin(admin.ModelAdmin):
    list_display = ("pk", "worker", "study", "kind", "amount_display", "status", "created_at")
    list_filter = ("status", "kind", "study")
    list_select_related = ("worker", "study")
    search_fields = ("worker__external_id", "reason")
    raw_id_fields = ("study", "worker", "judgment")
    readonly_fields = ("created_at",)

    @admin.display(description="amount", ordering="amount_cents")
    def amount_display(self, obj: PayEntry) -> str:
        return dollars(obj.amount_cents)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        # Sum what the filters and search selected, not only the page shown.
        if isinstance(response, TemplateResponse) and response.context_data:
            changelist = response.context_data.get("cl")
            if changelist is not None:
                total = changelist.queryset.aggregate(total=Sum("amount_cents"))["total"]
                response.context_data["amount_total"] = dollars(total or 0)
        return response
