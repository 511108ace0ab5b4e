"""Django admin for the judges app: judges are configured here, runs and calls are read here."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from judges.llm.prompts import TEMPLATES, VARIABLES
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun, template_hash
from judges.services.judges import judge_readiness, judge_validate


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
            "output_format",
            "params",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "requests_per_minute",
            "tokens_per_minute",
            "order_policy",
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
                for field in ("kind", "base_url", "model_name", "api_key_env", "prompt_template")
            }
        )
        judge_validate(judge=candidate)
        return data


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    form = JudgeAdminForm
    list_display = ("name", "kind", "model_name", "order_policy", "readiness")
    readonly_fields = ("template_hash",)

    @admin.display(description="state")
    def readiness(self, judge: Judge) -> str:
        return judge_readiness(judge=judge) or "ready"

    def save_model(self, request: HttpRequest, obj: Judge, form: Any, change: bool) -> None:
        obj.template_hash = template_hash(obj.prompt_template)
        super().save_model(request, obj, form, change)


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ("pk", "judge", "study", "status", "budget_usd", "started_at", "finished_at")
    list_filter = ("status", "judge")
    raw_id_fields = ("pairs",)


@admin.register(JudgeCall)
class JudgeCallAdmin(admin.ModelAdmin):
    list_display = ("pk", "run", "pair", "order", "status", "likert", "preference", "attempts")
    list_filter = ("status", "order", "refusal")
    raw_id_fields = ("run", "pair")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


admin.site.register(AnswerScore)
