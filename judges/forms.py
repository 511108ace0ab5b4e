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


class PLTrainingForm(forms.Form):
    """The settings of a PL training; the service checks them against the study's data."""

    name = forms.CharField(max_length=100, help_text="The name of the judge it becomes.")
    recipe = forms.ChoiceField(
        choices=[
            ("listwise", "Listwise PL likelihood over the top K"),
            ("pairwise", "AdvisorQA's pairwise decomposition"),
        ]
    )
    k = forms.ChoiceField(
        label="K", choices=[(k, k) for k in ("2", "3", "4", "5", "all")], initial="all"
    )
    sources = forms.MultipleChoiceField(
        choices=[("ranked", "Ranked lists (rank / upvotes)"), ("human", "Human pairwise labels")],
        initial=["ranked", "human"],
        widget=forms.CheckboxSelectMultiple,
    )
    ties = forms.ChoiceField(
        label="Human ties",
        choices=[("drop", "Dropped"), ("half", "Half a win each")],
    )
    likert_weights = forms.BooleanField(
        required=False, label="Weigh human labels by Likert strength"
    )
    mode = forms.ChoiceField(
        label="Backbone",
        choices=[
            ("head", "Frozen all-MiniLM-L6-v2 + small head (CPU, seconds)"),
            ("finetune", "Fine-tune all-MiniLM-L6-v2 (slow on a CPU)"),
            ("hf", "Local Hugging Face checkpoint (GPU when present)"),
        ],
    )
    checkpoint = forms.CharField(
        required=False, help_text="Folder of a sequence-classification checkpoint (num_labels=1)."
    )
    epochs = forms.IntegerField(min_value=1, max_value=10_000, initial=40)
    learning_rate = forms.FloatField(min_value=1e-8, initial=1e-3)
    holdout = forms.FloatField(
        label="Held-out share of prompts", min_value=0, max_value=0.9, initial=0.2
    )
    seed = forms.IntegerField(required=False, help_text="Empty: a random seed (recorded).")
