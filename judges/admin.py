"""Django admin for the judges app.

A judge names the environment variable that holds its key, never the key: the admin shows the
name and whether the variable is set, and nothing else about it.
"""

from __future__ import annotations

import os
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Count, Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from judges.llm.prompts import TEMPLATES, VARIABLES
from judges.models import (
    AnswerScore,
    ContrastScoring,
    Judge,
    JudgeCall,
    JudgeRun,
    PanelMember,
    ReferenceCall,
    template_hash,
)
from judges.services.judges import judge_readiness, judge_validate
from judges.services.panels import panel_validate
from judges.services.templates import TEMPLATE_FIELDS


def annotated(obj: Any, name: str) -> int:
    """An integer the list query annotated onto the row."""
    return int(getattr(obj, name, 0) or 0)


class JudgeAdminForm(forms.ModelForm):
    base_url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="OpenAI-compatible API base URL; its host must be on the allow-list.",
    )
    start_from = forms.ChoiceField(
        label="Start from a shipped template",
        required=False,
        choices=[("", "-")] + [(name, t.title) for name, t in TEMPLATES.items()],
        help_text="Fills the template and output format when the template is left empty.",
    )

    class Meta:
        model = Judge
        fields = [
            "name",
            "kind",
            "model_name",
            "model_version",
            "base_url",
            "api_key_env",
            "prompt_template",
            "reference_template",
            "multi_turn_template",
            "turns",
            "output_format",
            "params",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "requests_per_minute",
            "tokens_per_minute",
            "order_policy",
            "panel_rule",
        ]
        help_texts = {
            "prompt_template": "Variables: " + ", ".join("{" + name + "}" for name in VARIABLES),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        shipped = data.get("start_from")
        if shipped and not (data.get("prompt_template") or "").strip():
            data["prompt_template"] = TEMPLATES[shipped].text
            data["output_format"] = TEMPLATES[shipped].output_format
            self.instance.prompt_template = data["prompt_template"]
            self.instance.output_format = data["output_format"]
        candidate = Judge(
            **{
                field: data.get(field, getattr(self.instance, field))
                for field in (
                    "kind",
                    "base_url",
                    "model_name",
                    "api_key_env",
                    "prompt_template",
                    "reference_template",
                    "multi_turn_template",
                    "output_format",
                )
            }
        )
        judge_validate(judge=candidate)
        frozen = [
            field for field in (*TEMPLATE_FIELDS, "output_format") if field in self.changed_data
        ]
        if frozen and self.instance.pk and self.instance.runs.exists():
            # As on the researcher's page (judges.services.templates): past calls keep meaning.
            raise ValidationError(
                {
                    field: "This judge has runs: its templates and reply format stay as its calls "
                    "were made with. Make a new judge with the changed template."
                    for field in frozen
                }
            )
        return data


class PanelMemberFormSet(forms.BaseInlineFormSet):
    """A panel's members, checked as judges.services.panels.panel_create checks them."""

    def clean(self) -> None:
        super().clean()
        panel: Judge = self.instance
        kept = [
            form.cleaned_data
            for form in self.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        if panel.kind != Judge.Kind.PANEL:
            if kept:
                raise forms.ValidationError("Only a panel judge has members.")
            return
        try:
            panel_validate(
                study=panel.study,
                members=[row["member"] for row in kept],
                weights=[row["weight"] for row in kept],
                rule=panel.panel_rule,
            )
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from exc


class PanelMemberInline(admin.TabularInline):
    model = PanelMember
    fk_name = "panel"
    formset = PanelMemberFormSet
    extra = 0
    fields = ("member", "weight", "position")


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    form = JudgeAdminForm
    inlines = (PanelMemberInline,)
    list_display = (
        "name",
        "kind",
        "model_name",
        "model_version",
        "api_key_env",
        "key_is_set",
        "readiness",
        "order_policy",
        "run_count",
    )
    list_filter = ("kind", "order_policy")
    search_fields = ("name", "model_name")
    readonly_fields = ("template_hash", "key_is_set", "created_at")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = (
        (None, {"fields": ("name", "kind", "model_name", "model_version", "order_policy")}),
        ("Endpoint", {"fields": ("base_url", "api_key_env", "key_is_set")}),
        (
            "Prompt",
            {
                "fields": (
                    "start_from",
                    "prompt_template",
                    "output_format",
                    "template_hash",
                    "params",
                )
            },
        ),
        (
            "Price and rate limits",
            {
                "fields": (
                    "price_input_per_mtok",
                    "price_output_per_mtok",
                    "requests_per_minute",
                    "tokens_per_minute",
                )
            },
        ),
        ("Panel (jury)", {"fields": ("panel_rule",)}),
        ("Record", {"fields": ("created_at",), "classes": ("collapse",)}),
    )

    def get_inlines(self, request: HttpRequest, obj: Judge | None) -> list[Any]:
        # Members are added once the judge is saved as a panel (its study decides who may sit).
        return list(self.inlines) if obj is not None and obj.kind == Judge.Kind.PANEL else []

    def get_queryset(self, request: HttpRequest) -> QuerySet[Judge]:
        return super().get_queryset(request).annotate(run_count=Count("runs"))

    @admin.display(description="runs", ordering="run_count")
    def run_count(self, obj: Judge) -> int:
        return annotated(obj, "run_count")

    @admin.display(description="state")
    def readiness(self, judge: Judge) -> str:
        return judge_readiness(judge=judge) or "ready"

    @admin.display(description="key set", boolean=True)
    def key_is_set(self, obj: Judge) -> bool | None:
        # Says only whether a key exists (pasted, stored encrypted, or the variable in this
        # process's environment); never its value.
        if obj.api_key_encrypted:
            return True
        if not obj.api_key_env:
            return None
        return bool(os.environ.get(obj.api_key_env))

    def save_model(
        self, request: HttpRequest, obj: Judge, form: ModelForm[Judge], change: bool
    ) -> None:
        obj.template_hash = template_hash(
            obj.prompt_template, obj.reference_template, obj.multi_turn_template
        )
        super().save_model(request, obj, form, change)


CALL_STATUSES = tuple(JudgeCall.Status)


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = (
        "pk",
        "judge",
        "study",
        "status",
        "budget_usd",
        "calls_pending",
        "calls_running",
        "calls_done",
        "calls_failed",
        "calls_skipped",
        "created_at",
    )
    list_filter = ("status", "judge", "study")
    list_select_related = ("judge", "study")
    search_fields = ("note", "judge__name", "study__slug")
    raw_id_fields = ("judge", "study", "pairs", "panel_sources", "created_by")
    readonly_fields = ("created_by", "created_at", "started_at", "finished_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[JudgeRun]:
        # One join on calls, one filtered count per status: no query per row.
        counts = {
            f"calls_{status.value}_n": Count("calls", filter=Q(calls__status=status))
            for status in CALL_STATUSES
        }
        return super().get_queryset(request).annotate(**counts)

    @admin.display(description="pending")
    def calls_pending(self, obj: JudgeRun) -> int:
        return annotated(obj, "calls_pending_n")

    @admin.display(description="running")
    def calls_running(self, obj: JudgeRun) -> int:
        return annotated(obj, "calls_running_n")

    @admin.display(description="done")
    def calls_done(self, obj: JudgeRun) -> int:
        return annotated(obj, "calls_done_n")

    @admin.display(description="failed")
    def calls_failed(self, obj: JudgeRun) -> int:
        return annotated(obj, "calls_failed_n")

    @admin.display(description="skipped")
    def calls_skipped(self, obj: JudgeRun) -> int:
        return annotated(obj, "calls_skipped_n")


@admin.register(JudgeCall)
class JudgeCallAdmin(admin.ModelAdmin):
    """Calls are the record of what a judge was asked and said: readable, never edited."""

    list_display = (
        "pk",
        "run",
        "pair_id",
        "order",
        "status",
        "likert_shown",
        "likert",
        "preference",
        "refusal",
        "has_parse_error",
        "cost_usd",
        "latency_ms",
        "attempts",
    )
    list_filter = ("status", "order", "refusal", "run")
    list_select_related = ("run__judge", "run__study")
    search_fields = ("raw_output",)

    @admin.display(description="parse error", boolean=True)
    def has_parse_error(self, obj: JudgeCall) -> bool:
        return bool(obj.parse_error)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: JudgeCall | None = None) -> bool:
        return False


@admin.register(ReferenceCall)
class ReferenceCallAdmin(admin.ModelAdmin):
    """The reference ledger: what each reference judge was asked for a prompt, what it said and
    cost; readable, never edited (judges.services.references writes it)."""

    list_display = (
        "pk",
        "study",
        "prompt_id",
        "judge",
        "status",
        "stored",
        "tokens_in",
        "tokens_out",
        "cost_usd",
        "attempts",
        "finished_at",
    )
    list_filter = ("status", "judge", "study")
    list_select_related = ("study", "judge")
    search_fields = ("reply", "error")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ReferenceCall | None = None) -> bool:
        return False


@admin.register(AnswerScore)
class AnswerScoreAdmin(admin.ModelAdmin):
    list_display = ("pk", "run", "answer_id", "score", "created_at")
    list_filter = ("run",)
    list_select_related = ("run__judge", "run__study")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AnswerScore | None = None) -> bool:
        return False


@admin.register(ContrastScoring)
class ContrastScoringAdmin(admin.ModelAdmin):
    """A PL run's stored scoring of a contrast set (judges.reward.contrast writes it); readable,
    never edited. Deleting one leaves the run out of the report's consistency section until a
    contrast set is built again, which scores it again."""

    list_display = (
        "pk",
        "run",
        "contrast_set",
        "status",
        "pairs",
        "backbone",
        "temperature",
        "attempts",
        "finished_at",
    )
    list_filter = ("status",)
    list_select_related = ("run__judge", "run__study", "contrast_set__study")
    exclude = ("scores", "query_vectors", "answer_ids", "answer_vectors", "lease_token")
    search_fields = ("error",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: ContrastScoring | None = None
    ) -> bool:
        return False
