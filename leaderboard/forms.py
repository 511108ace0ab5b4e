"""The analysis page's filters."""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.models import Study
from leaderboard.models import Followup
from leaderboard.selectors.filters import study_filter_choices
from leaderboard.selectors.frames import VoteFilters


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
