"""The demo's judges: two baselines that run anywhere, and a GPT-4 judge that needs a key.

The demo study's Contrast Instructions are built by `leaderboard.services.demo`."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from judges.models import Judge
from judges.services.judges import judge_create

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
    },
)


@transaction.atomic
def demo_judges_ensure() -> list[Judge]:
    """Create the demo judges that do not exist yet (by name); return all of them."""
    judges = []
    for spec in DEMO_JUDGES:
        existing = Judge.objects.filter(name=spec["name"]).first()
        judges.append(existing or judge_create(**spec))  # type: ignore[arg-type]
    return judges
