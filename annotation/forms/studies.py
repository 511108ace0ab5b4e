"""The researcher's forms for a study: create, settings, members. They parse; services decide."""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.models import PANEL_TOKEN_VALIDATOR, Study
from annotation.services.studies import SETTINGS_FIELDS, study_settings_problems

GOLD_HELP = {
    "gold_share": "Share of gold pairs (pairs with a known better side) among those a worker "
    "is shown, 0 to 1. 0 switches gold checks off.",
    "gold_warn_accuracy": "Gold accuracy below which a worker is warned, 0 to 1.",
    "gold_block_accuracy": "Gold accuracy below which a worker gets no more work, 0 to 1 (not "
    "above the warn threshold).",
    "gold_min_items": "Gold judgments a worker must make before the thresholds and the gold "
    "bonus count. Until then a worker is neither warned nor blocked, and the gold bonus is 0 "
    "even at 100% accuracy: with the default of 3 and a session that shows only 2 gold pairs, "
    "nobody ever earns it. The form refuses a minimum above the gold pairs a session shows.",
    "qualification_items": "The first items each worker sees are gold (a qualification "
    "block); 0 for none.",
}


class StudyCreateForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="What workers and researchers see.")
    slug = forms.SlugField(
        label="Short name",
        max_length=80,
        required=False,
        help_text="Used in links (letters, digits, -). Empty: made from the name.",
    )


class CategoriesField(forms.CharField):
    """Categories as a comma-separated line; a list of distinct names once cleaned."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        names = [part.strip() for part in text.split(",")]
        return list(dict.fromkeys(name for name in names if name))


class StudySettingsForm(forms.ModelForm):
    """Every setting a researcher configures, with its help text and the rules between them."""

    categories = CategoriesField(
        required=False,
        help_text="Categories shown in the analysis filters, separated by commas; empty means "
        "every category in the data.",
    )
    completion_url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="Where a finished worker is sent. Empty: for Prolific workers, Prolific's own "
        "completion link with the code; otherwise the code is shown.",
    )

    class Meta:
        model = Study
        fields = list(SETTINGS_FIELDS)
        widgets = {
            "instructions": forms.Textarea(attrs={"rows": 8}),
            "description": forms.Textarea(attrs={"rows": 2}),
            "notes": forms.Textarea(attrs={"rows": 2}),
        }
        help_texts = GOLD_HELP | {
            "completion_code": "The code Prolific expects from a worker who reached the target "
            "(or ran out of work). Create it on Prolific first (action: approve) and paste it "
            "here; letters, digits, - and _.",
            "partial_completion_code": "The code for a worker who stops early. Add it on "
            "Prolific as a second completion code (for example: manual review, or approve and "
            "pay the judgments made as a bonus); it must differ from the full code. Empty: "
            "those who stop early get no code.",
            "screened_out_code": "The code for a worker who gets no more items because the "
            "gold checks or a researcher blocked them: Prolific's screened-out code (add it on "
            "Prolific with the screen-out action). It must differ from the other two. Empty: "
            "blocked workers get no code, only the link back.",
            "prolific_study_id": "The study's id on Prolific (in its URL, 24 characters). Entry "
            "compares Prolific's STUDY_ID with it and refuses any other.",
            "selection": "Uniform: each worker gets a random open pair among the fewest-taken. "
            "Active: open pairs are drawn by a priority the analysis worker recomputes (judges "
            "disagree, people disagree, the two systems' leaderboard intervals overlap, the "
            "category has few labels), so labels go where they change the answer; each "
            "assignment records its chance of being drawn and the agreement estimates weight "
            "by it (docs/active.md).",
            "uniform_share": "With active selection, the share of draws made uniformly at "
            "random (0.2 = 20%), above 0 and at most 1: every open pair keeps a known chance.",
            "pay_per_judgment_cents": "Pay per accepted judgment, in US cents.",
            "hourly_floor_cents": "Effective hourly pay, in US cents, below which the checklist "
            "and the workers page raise an alert (Prolific's minimum is a floor, not a target).",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for field, message in study_settings_problems(data).items():
            if field in self.fields and field not in self.errors:
                self.add_error(field, message)
        return data


class MemberAddForm(forms.Form):
    identifier = forms.CharField(
        label="Username or e-mail",
        max_length=254,
        help_text="Someone who already has the researcher role.",
    )


class ProlificConnectionForm(forms.Form):
    """The study's Prolific API token (never shown back) and the Prolific study to link."""

    token = forms.CharField(
        label="Prolific API token",
        required=False,
        max_length=500,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="From Prolific: Settings -> API tokens -> Create API token. Stored encrypted, "
        "never shown again; empty keeps the stored one.",
    )
    prolific_study_id = forms.CharField(
        label="Prolific study id",
        required=False,
        max_length=64,
        validators=[PANEL_TOKEN_VALIDATOR],
        help_text="The id in the Prolific study's URL (24 characters); Concord reads the study "
        "with the token before it links it.",
    )


class ProlificDraftForm(forms.Form):
    """What a researcher chooses for the draft Concord creates on Prolific; the rest (codes,
    reward, minutes, the entry link) comes from the study's settings and is shown beside it."""

    name = forms.CharField(
        label="Title on Prolific",
        max_length=200,
        help_text="What participants see in Prolific's list of studies.",
    )
    description = forms.CharField(
        label="Description on Prolific",
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What participants read before they start (what the task is, how long).",
    )
    places = forms.IntegerField(
        label="Places",
        min_value=1,
        max_value=100_000,
        help_text="How many participants Prolific recruits; entry is capped at this many.",
    )
