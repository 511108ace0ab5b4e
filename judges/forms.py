"""Forms of the judges app: they parse, the services decide."""

from __future__ import annotations

from django import forms

from judges.models import Judge
from judges.services.judges import RUNNABLE_KINDS


class RunStartForm(forms.Form):
    judge = forms.ModelChoiceField(queryset=Judge.objects.filter(kind__in=RUNNABLE_KINDS))
    budget_usd = forms.DecimalField(
        label="Budget (USD)",
        required=False,
        min_value=0,
        max_digits=12,
        decimal_places=6,
        help_text="Empty: no cap.",
    )


class RunResumeForm(forms.Form):
    budget_usd = forms.DecimalField(
        label="New budget (USD)",
        required=False,
        min_value=0,
        max_digits=12,
        decimal_places=6,
        help_text="Empty: keep the current budget.",
    )
