"""The demo's judges: two baselines that run anywhere, and a GPT-4 judge that needs a key; and
the demo study's Contrast Instructions, on which every judge and person is measured."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from annotation.models import ContrastSet, Study, System
from annotation.services.contrast import ContrastSetError
from annotation.services.pairs import PairsGenerationError, pairs_generate
from judges.models import Judge
from judges.reward.encoder import BackboneNotFound
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


DEMO_CONTRAST_SYSTEM = "atlas-large"
"""The demo's best answer r_A of a contrast pair: atlas-large's, the usual winner (see
fixtures/README.md), since only the advice prompts are ranked."""


def demo_contrast_ensure(*, study: Study) -> str:
    """Build the demo study's contrast set (seed 0, the default window, atlas-large's answers as
    the best) and its items, unless they exist; say what there is, or why there is none."""
    from leaderboard.services.contrast import ContrastBuildError, contrast_set_build

    system = System.objects.filter(study=study, name=DEMO_CONTRAST_SYSTEM).first()
    try:
        built = contrast_set_build(study=study, seed=0, best=ContrastSet.Best.SYSTEM, system=system)
        items = pairs_generate(study=study, strategy="contrast", seed=0)
    except (ContrastBuildError, ContrastSetError, PairsGenerationError, BackboneNotFound) as exc:
        return f"Contrast set: none ({exc})"
    made = items.created + items.already_present
    return (
        f"Contrast set: {built.stored.contrast_set.pairs.count()} pairs of similar prompts, "
        f"{made} contrast items."
    )
