"""The analysis pages' forms: filters, follow-ups, the label planner, report settings and the
contrast set build."""

from __future__ import annotations

import math
from typing import Any

from django import forms

from annotation.models import ContrastSet, Study, System
from judges.reward.encoder import DEFAULT_BACKBONE
from leaderboard.models import Followup
from leaderboard.selectors.filters import study_filter_choices
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services.contrast_jobs import (
    BackboneRefused,
    ContrastBuildOptions,
    contrast_backbone_resolve,
)
from leaderboard.stats.consistency import DEFAULT_WINDOW


class AnalysisFilterForm(forms.Form):
    """Category, turn, gold, raters and judge runs; every field optional."""

    category = forms.ChoiceField(required=False)
    turn = forms.TypedChoiceField(required=False, coerce=int, empty_value=None)
    exclude_gold = forms.BooleanField(required=False, label="Exclude gold pairs")
    raters = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Default (experts when the study has expert_* raters)"),
            ("experts", "Experts only"),
            ("all", "All raters"),
        ],
    )
    run = forms.TypedMultipleChoiceField(
        required=False, coerce=int, label="Judge runs (none selected: all)"
    )

    def __init__(
        self, *args: Any, study: Study, fingerprint: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fingerprint = fingerprint  # the study's data fingerprint the choices were read under
        choices = study_filter_choices(study=study, fingerprint=fingerprint)
        category, turn, run = self.fields["category"], self.fields["turn"], self.fields["run"]
        assert isinstance(category, forms.ChoiceField)
        assert isinstance(turn, forms.ChoiceField)
        assert isinstance(run, forms.MultipleChoiceField)
        category.choices = [("", "All categories")] + [(c, c) for c in choices["categories"]]
        turn.choices = [("", "All turns")] + [(str(t), f"Turn {t}") for t in choices["turns"]]
        run.choices = [(str(r["id"]), r["name"]) for r in choices["runs"]]

    def filters(self) -> VoteFilters:
        """The cleaned fields as report filters (call after is_valid)."""
        data = self.cleaned_data
        return VoteFilters(
            category=data.get("category") or None,
            turn=data.get("turn"),
            exclude_gold=bool(data.get("exclude_gold")),
            judge_run_ids=tuple(sorted(data["run"])) if data.get("run") else None,
            raters=data.get("raters") or None,
        )


class FollowupForm(forms.Form):
    """Two judge runs of the study, which of their disagreements to keep (where the first or the
    second run voted the known better side, or any), how many to sample, and the seed."""

    judge_a_run = forms.TypedChoiceField(coerce=int, label="First judge run")
    judge_b_run = forms.TypedChoiceField(coerce=int, label="Second judge run")
    agreeing = forms.TypedChoiceField(
        choices=Followup.Agreeing.choices,
        initial=Followup.Agreeing.ANY,
        required=False,
        empty_value=Followup.Agreeing.ANY,
        label="Disagreements to sample",
        help_text="The better side is the gold side or the answers' ranks, else the people's "
        "majority; a pair where one run voted a tie and the other the worse side is in 'any' only.",
    )
    sample_size = forms.IntegerField(min_value=1, max_value=100_000, initial=300)
    seed = forms.IntegerField(min_value=0, initial=0)

    def __init__(
        self, *args: Any, study: Study, fingerprint: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        choices = study_filter_choices(study=study, fingerprint=fingerprint)
        runs = [(str(r["id"]), r["name"]) for r in choices["runs"]]
        for name in ("judge_a_run", "judge_b_run"):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = runs
        if len(runs) >= 2:
            self.fields["judge_b_run"].initial = runs[1][0]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("judge_a_run") is not None and data.get("judge_a_run") == data.get(
            "judge_b_run"
        ):
            self.add_error("judge_b_run", "Choose two different judge runs.")
        return data


class LabelPlanForm(forms.Form):
    """The planner's question: which judge, what half width, on how many prompts."""

    judge = forms.ChoiceField()
    target_points = forms.FloatField(
        min_value=0.1,
        max_value=50,
        initial=3.0,
        label="Target half width (± percentage points)",
    )
    prompts = forms.IntegerField(
        required=False,
        min_value=1,
        label="Prompts (empty: the ones voted on so far; more for a study still to grow)",
    )

    def __init__(self, *args: Any, judges: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        judge = self.fields["judge"]
        assert isinstance(judge, forms.ChoiceField)
        judge.choices = [(name, name) for name in judges]


class ReportSettingsForm(forms.Form):
    """The study's report settings: the baseline of the length-controlled win rates and the
    price of the PL judge's compute."""

    baseline = forms.ChoiceField(
        required=False,
        label="Baseline of the length-controlled win rates",
        help_text="Every model's win rate is against this system; default: the system in the most "
        "pairs.",
    )
    pl_usd_per_1000 = forms.DecimalField(
        min_value=0,
        max_digits=10,
        decimal_places=4,
        initial=0,
        label="PL reward model compute, USD per 1,000 pairs",
        help_text="Prices the PL judge in the agreement-per-dollar table; 0: not priced.",
    )

    def __init__(self, *args: Any, systems: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["baseline"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "The system in the most pairs")] + [(s, s) for s in systems]


class ContrastBuildForm(forms.Form):
    """The contrast set build's options, those of `manage.py build_contrast_set`, each with the
    command's default; an empty field takes the default. Each error names its field."""

    low = forms.FloatField(
        required=False,
        label="Lowest cosine",
        initial=DEFAULT_WINDOW[0],
        help_text="Questions at least this similar are paired (from -1 to 1).",
    )
    high = forms.FloatField(
        required=False,
        label="Highest cosine",
        initial=DEFAULT_WINDOW[1],
        help_text="and at most this similar (from -1 to 1, not below the lowest).",
    )
    seed = forms.IntegerField(
        required=False,
        label="Seed",
        initial=0,
        help_text="Seed of the matching (each prompt at most once per seed; 0 to 2147483647).",
    )
    best = forms.ChoiceField(
        required=False,
        label="Best answer",
        choices=ContrastSet.Best.choices,
        initial=ContrastSet.Best.FIRST_RANKED,
        help_text="How each prompt's best answer is chosen.",
    )
    system = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        label="System",
        help_text="Only with the best answer 'A named system's answer': whose answers.",
    )
    backbone = forms.CharField(
        required=False,
        max_length=200,
        label="Backbone",
        initial=DEFAULT_BACKBONE,
        help_text=f"Sentence encoder: {DEFAULT_BACKBONE} or a sentence-transformers folder under "
        "the checkpoints root.",
    )
    items = forms.BooleanField(
        required=False,
        label="Also create the contrast items (each prompt of a pair shown with both best answers)",
    )

    SEED_MAX = 2**31 - 1

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.systems = {
            system.pk: f"{system.name}:{system.version}" if system.version else system.name
            for system in System.objects.filter(study=study).order_by("name", "version")
        }
        system = self.fields["system"]
        assert isinstance(system, forms.ChoiceField)
        system.choices = [("", "(none)")] + [(str(pk), label) for pk, label in self.systems.items()]
        for name, field in self.fields.items():
            label = str(field.label)
            field.error_messages["invalid"] = f"{label}: {self._what(name)}."
            field.error_messages["invalid_choice"] = f"{label}: not one of the choices."
            field.error_messages["max_length"] = f"{label}: at most 200 characters."

    @staticmethod
    def _what(name: str) -> str:
        return {
            "low": "give a number from -1 to 1",
            "high": "give a number from -1 to 1",
            "seed": "give a whole number from 0 to 2147483647",
        }.get(name, "not valid")

    def _cosine(self, name: str) -> float:
        value = self.cleaned_data.get(name)
        default = DEFAULT_WINDOW[0] if name == "low" else DEFAULT_WINDOW[1]
        if value is None:
            return default
        if not math.isfinite(value) or not -1 <= value <= 1:
            raise forms.ValidationError(f"{self.fields[name].label}: {self._what(name)}.")
        return float(value)

    def clean_low(self) -> float:
        return self._cosine("low")

    def clean_high(self) -> float:
        return self._cosine("high")

    def clean_seed(self) -> int:
        seed = self.cleaned_data.get("seed")
        if seed is None:
            return 0
        if not 0 <= seed <= self.SEED_MAX:
            raise forms.ValidationError(f"Seed: {self._what('seed')}.")
        return int(seed)

    def clean_best(self) -> str:
        return str(self.cleaned_data.get("best") or ContrastSet.Best.FIRST_RANKED.value)

    def clean_backbone(self) -> str:
        backbone = str(self.cleaned_data.get("backbone") or "").strip() or DEFAULT_BACKBONE
        try:
            contrast_backbone_resolve(backbone)
        except BackboneRefused as exc:
            raise forms.ValidationError(str(exc)) from exc
        return backbone

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        low, high = data.get("low"), data.get("high")
        if low is not None and high is not None and low > high:
            self.add_error("high", f"Highest cosine: {high:g} is below the lowest cosine {low:g}.")
        best, system = data.get("best"), data.get("system")
        if best == ContrastSet.Best.SYSTEM and system is None:
            self.add_error(
                "system",
                "System: choose whose answers are the best answers (the best answer is 'A "
                "named system's answer').",
            )
        elif best and best != ContrastSet.Best.SYSTEM and system is not None:
            self.add_error(
                "system",
                "System: leave it at (none) unless the best answer is 'A named system's answer'.",
            )
        return data

    def options(self) -> ContrastBuildOptions:
        """The cleaned fields as the build's options (call after is_valid)."""
        data = self.cleaned_data
        system = data.get("system")
        return ContrastBuildOptions(
            low=data["low"],
            high=data["high"],
            seed=data["seed"],
            best=data["best"],
            system_id=system,
            system_label=self.systems.get(system, "") if system is not None else "",
            backbone=data["backbone"],
            items=bool(data.get("items")),
        )
