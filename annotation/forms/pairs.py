"""The researcher's form for generating pairs."""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.models import Pair, Study, System
from annotation.selectors.pairs import system_list_for_study
from annotation.services.pairs import STRATEGIES
from core.conventions import GOLD_KINDS


class PairsGenerateForm(forms.Form):
    """Which regular pairs to generate (optional) and which gold pairs to add (optional)."""

    strategy = forms.ChoiceField(
        choices=[("", "No regular pairs (gold only)")] + [(s, s) for s in STRATEGIES],
        required=False,
        initial="all",
        help_text="all: every pair of systems; baseline: each system against the baseline; "
        "sample: k pairs per prompt.",
    )
    baseline = forms.ModelChoiceField(
        queryset=System.objects.none(), required=False, help_text="For the baseline strategy."
    )
    k = forms.IntegerField(
        label="k", min_value=1, required=False, help_text="Pairs per prompt (sample)."
    )
    turns = forms.ChoiceField(choices=[("all", "every turn"), ("last", "last turn only")])
    seed = forms.IntegerField(initial=0, min_value=0)
    gold = forms.ChoiceField(
        choices=[("", "No gold pairs")]
        + [(kind, Pair.GoldKind(kind).label) for kind in GOLD_KINDS],
        required=False,
        label="Gold pairs",
        help_text="Added up to the study's gold share, from ranked answers (rank or upvotes).",
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        baseline = self.fields["baseline"]
        assert isinstance(baseline, forms.ModelChoiceField)
        baseline.queryset = system_list_for_study(study=study)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        strategy = data.get("strategy")
        if not strategy and not data.get("gold"):
            raise forms.ValidationError("Choose a strategy, a gold kind, or both.")
        if strategy == "baseline" and not data.get("baseline"):
            self.add_error("baseline", "The baseline strategy needs a baseline system.")
        if strategy == "sample" and not data.get("k"):
            self.add_error("k", "The sample strategy needs k, the pairs per prompt.")
        return data
