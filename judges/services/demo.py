"""The demo's judges: two baselines that run anywhere, and two GPT-4 judges that need a key (a
pairwise Likert judge, and a single-answer grading judge that reads the reference answers of the
study's math prompts).

The GPT-4 judges are the demo study's own, so the demo's researcher can paste its key on the
judge's page (stored encrypted) without stopping the demo; the baselines are shared.

With the study, a panel of all three (a jury, judges.services.panels; majority of their verdicts)
is the study's own too: it runs once its members have a done run on the study.

The demo study's Contrast Instructions are built by `leaderboard.services.demo`."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from annotation.models import Study
from judges.models import Judge
from judges.services.judges import judge_create
from judges.services.panels import panel_create

DEMO_JUDGES: tuple[dict[str, object], ...] = (
    {"name": "baseline: random", "kind": Judge.Kind.RANDOM},
    {"name": "baseline: longer answer", "kind": Judge.Kind.LONGER},
    {
        "name": "gpt-4 (H4 Likert)",
        "kind": Judge.Kind.LLM,
        "model_name": "gpt-4",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "template_name": "likert",
        "price_input_per_mtok": Decimal("30"),
        "price_output_per_mtok": Decimal("60"),
        "requests_per_minute": 60,
        "own": True,
    },
    {
        # MT-Bench's single-answer mode: one grade 1-10 per answer, reused across pairs; math
        # prompts are graded against the fixture's reference answer.
        "name": "gpt-4 (single grade, reference for math)",
        "kind": Judge.Kind.LLM,
        "model_name": "gpt-4",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "template_name": "grade",
        "reference_guided": True,
        "price_input_per_mtok": Decimal("30"),
        "price_output_per_mtok": Decimal("60"),
        "requests_per_minute": 60,
        "own": True,
    },
)
DEMO_PANEL = "jury: random + longer + gpt-4 (majority)"
# The panel's members: the two baselines and the pairwise GPT-4 judge.
DEMO_PANEL_MEMBERS = ("baseline: random", "baseline: longer answer", "gpt-4 (H4 Likert)")


@transaction.atomic
def demo_judges_ensure(*, study: Study | None = None) -> list[Judge]:
    """Create the demo judges that do not exist yet (by name); return all of them.

    With `study`, the judges marked `own` belong to it (one made shared by an older demo is
    handed to it), so its researchers may replace their keys, and the demo panel of them all
    (DEMO_PANEL) is made, the study's own."""
    judges = []
    for spec in DEMO_JUDGES:
        fields = {k: v for k, v in spec.items() if k != "own"}
        owner = study if spec.get("own") else None
        judge = Judge.objects.filter(name=spec["name"]).first()
        if judge is None:
            judge = judge_create(**fields, study=owner)  # type: ignore[arg-type]
        elif owner is not None and judge.study_id is None:
            Judge.objects.filter(pk=judge.pk, study__isnull=True).update(study=owner)
            judge.study = owner
        judges.append(judge)
    if study is not None:
        panel = Judge.objects.filter(name=DEMO_PANEL).first()
        if panel is None:
            members = [j for j in judges if j.name in DEMO_PANEL_MEMBERS]
            panel = panel_create(
                name=DEMO_PANEL, study=study, members=members, rule=Judge.PanelRule.MAJORITY
            )
        judges.append(panel)
    return judges
