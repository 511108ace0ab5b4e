"""Forms of the judges app: they parse, the services decide."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms

from annotation.models import Pair, Study
from judges.kinds import RUNNABLE_KINDS
from judges.llm.prompts import TEMPLATES
from judges.models import Judge, OutputFormat, Turns
from judges.selectors.judges import judge_list_for_study


class RunStartForm(forms.Form):
    judge = forms.ModelChoiceField(queryset=Judge.objects.none())
    budget_usd = forms.DecimalField(
        label="Budget (USD)",
        required=False,
        min_value=0,
        max_digits=12,
        decimal_places=6,
        help_text="Empty: no cap.",
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only the admin's shared judges and this study's own: never another study's key.
        self.fields["judge"].queryset = judge_list_for_study(study=study).filter(  # type: ignore[attr-defined]
            kind__in=RUNNABLE_KINDS
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
        required=False,
        help_text=(
            "Name of a sequence-classification checkpoint (num_labels=1) under the server's "
            "checkpoints root."
        ),
    )
    epochs = forms.IntegerField(min_value=1, max_value=10_000, initial=40)
    learning_rate = forms.FloatField(min_value=1e-8, initial=1e-3)
    holdout = forms.FloatField(
        label="Held-out share of prompts", min_value=0, max_value=0.9, initial=0.2
    )
    seed = forms.IntegerField(required=False, help_text="Empty: a random seed (recorded).")


class JudgeCreateForm(forms.Form):
    """An LLM judge from a shipped template; its key named as a variable or pasted."""

    KEY_FROM_ENV, KEY_PASTED = "env", "paste"

    name = forms.CharField(max_length=100, help_text="Unique; shown on run pages and reports.")
    template = forms.ChoiceField(
        choices=[(name, f"{t.title} ({name})") for name, t in TEMPLATES.items()],
        help_text="The prompt the judge is sent; each asks for a reply format Concord parses.",
    )
    model_name = forms.CharField(max_length=200, help_text="As the API names it, e.g. gpt-4o.")
    base_url = forms.URLField(
        assume_scheme="https",
        help_text="The OpenAI-compatible API, e.g. https://api.openai.com/v1; its host must be "
        "on CONCORD_JUDGE_HOST_ALLOWLIST.",
    )
    key_source = forms.ChoiceField(
        choices=[(KEY_PASTED, "Paste the key here"), (KEY_FROM_ENV, "Environment variable")],
        widget=forms.RadioSelect,
        initial=KEY_PASTED,
        label="Key",
    )
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted with a key derived from the server's SECRET_KEY; never "
        "shown again, logged or exported.",
    )
    api_key_env = forms.CharField(
        label="Environment variable",
        max_length=100,
        required=False,
        help_text="The name of the variable that holds the key on the workers, e.g. "
        "OPENAI_API_KEY (the key itself never goes here).",
    )
    price_input_per_mtok = forms.DecimalField(
        label="Price per million input tokens (USD)", min_value=0, initial=0, decimal_places=4
    )
    price_output_per_mtok = forms.DecimalField(
        label="Price per million output tokens (USD)", min_value=0, initial=0, decimal_places=4
    )
    requests_per_minute = forms.IntegerField(
        min_value=1, required=False, help_text="Your API tier's limit; empty: none."
    )
    order_policy = forms.ChoiceField(
        choices=Judge.OrderPolicy.choices,
        initial=Judge.OrderPolicy.BOTH,
        help_text="Both orders measure the judge's position bias (twice the calls).",
    )
    turns = forms.ChoiceField(
        label="Turns of multi-turn prompts",
        choices=Turns.choices,
        initial=Turns.PAIR,
        required=False,
        help_text="The pair's turn: what people judged. Every turn: MT-Bench's way, a call per "
        "turn of the prompt (more calls).",
    )
    multi_turn = forms.BooleanField(
        label="Show the whole conversation at later turns",
        required=False,
        initial=True,
        help_text="Use the template's multi-turn variant for turn 2 and later (likert, "
        "verdict and grade have one); the others show later turns with the plain template.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["turns"] = data.get("turns") or Turns.PAIR
        # Only likert, verdict and grade ship a multi-turn variant; the others keep the plain
        # template.
        template = TEMPLATES.get(data.get("template") or "")
        data["multi_turn"] = bool(data.get("multi_turn") and template and template.multi_turn_text)
        if data.get("key_source") == self.KEY_PASTED and not data.get("api_key"):
            self.add_error("api_key", "Paste the key, or choose an environment variable.")
        if data.get("key_source") == self.KEY_FROM_ENV and not data.get("api_key_env"):
            self.add_error("api_key_env", "Name the variable, or paste the key.")
        return data


class JudgeKeyForm(forms.Form):
    api_key = forms.CharField(
        label="New API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Replaces the judge's key; stored encrypted, never shown again.",
    )


class PanelCreateForm(forms.Form):
    """A panel (jury) of the study's judges; judges.services.panels.panel_create decides."""

    name = forms.CharField(max_length=100, help_text="Unique; shown on run pages and reports.")
    members = forms.ModelMultipleChoiceField(
        queryset=Judge.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Two or more of the study's judges (not panels); each needs a done run on "
        "the study before the panel can run.",
    )
    rule = forms.ChoiceField(
        choices=Judge.PanelRule.choices,
        help_text="Majority: the members' A / B / tie verdicts, a shared most is a tie. Mean "
        "Likert: rounded to the nearest score, a half towards the middle.",
    )
    weights = forms.CharField(
        required=False,
        help_text="Weighted mean only: one positive number per chosen member, in the order "
        "they are listed (by name), e.g. 3, 1, 1.",
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only the admin's shared judges and this study's own, never a panel.
        self.fields["members"].queryset = (  # type: ignore[attr-defined]
            judge_list_for_study(study=study).exclude(kind=Judge.Kind.PANEL).order_by("name")
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        members = sorted(data.get("members") or [], key=lambda judge: judge.name)
        data["members"] = members
        data["weight_list"] = None
        if data.get("rule") == Judge.PanelRule.WEIGHTED:
            text = (data.get("weights") or "").replace(";", ",")
            try:
                weights = [Decimal(part.strip()) for part in text.split(",") if part.strip()]
            except InvalidOperation:
                self.add_error("weights", "Write numbers separated by commas, e.g. 3, 1, 1.")
                return data
            if len(weights) != len(members):
                self.add_error(
                    "weights", f"Give one weight per chosen member ({len(members)} chosen)."
                )
            data["weight_list"] = weights
        return data


def _template_field(*, rows: int, help_text: str, required: bool = False) -> forms.CharField:
    """A template's text area; kept exactly as typed (no stripping), since its hash is stored."""
    return forms.CharField(
        strip=False,
        required=required,
        widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false"}),
        help_text=help_text,
    )


class JudgeTemplateForm(forms.Form):
    """A judge's templates as the researcher edits them, the pair to preview them on, a sample
    reply to parse, and the name of a new judge to save them as; the services check them."""

    prompt_template = _template_field(
        rows=16,
        required=True,
        help_text="Variables: {question}, {answer_first}, {answer_second} (or {answer} for a "
        "grading judge), {turn}, {values}, {conversation}.",
    )
    reference_template = _template_field(
        rows=8,
        help_text="Used for prompts of the study's reference categories; shows {reference}. "
        "Empty: the judge is not reference-guided.",
    )
    multi_turn_template = _template_field(
        rows=8,
        help_text="Used for calls at turn 2 and later; shows {conversation}. Empty: later turns "
        "use the prompt template.",
    )
    output_format = forms.ChoiceField(label="Reply format", choices=OutputFormat.choices)
    pair = forms.TypedChoiceField(
        label="Preview on the pair", coerce=int, required=False, empty_value=None
    )
    sample_reply = forms.CharField(
        label="Check the reply format on a sample reply",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="Paste a reply the judge might write: the page shows what the parser reads.",
    )
    new_name = forms.CharField(
        label="Name of the new judge", required=False, max_length=100, help_text="To save as new."
    )

    def __init__(self, *args: Any, pairs: list[Pair], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["pair"]
        field.choices = [  # type: ignore[attr-defined]
            (
                pair.pk,
                f"#{pair.pk} {pair.prompt.external_id}"
                + (f" ({pair.prompt.category})" if pair.prompt.category else "")
                + (f", turn {pair.turn}" if pair.turn > 1 else ""),
            )
            for pair in pairs
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # A browser sends a textarea's lines ending in CR LF; the template keeps them as typed.
        for name in ("prompt_template", "reference_template", "multi_turn_template"):
            if isinstance(data.get(name), str):
                data[name] = data[name].replace("\r\n", "\n")
        return data
