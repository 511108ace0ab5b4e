"""The demo study's Contrast Instructions, on which every judge and person is measured.

Here rather than beside the demo's judges (`judges.services.demo`) because building a contrast
set is leaderboard's (`leaderboard.services.contrast`), and judges must not import leaderboard.
"""

from __future__ import annotations

from annotation.models import ContrastSet, Study, System
from annotation.services.contrast import ContrastSetError
from annotation.services.pairs import PairsGenerationError, pairs_generate
from judges.reward.encoder import BackboneNotFound
from leaderboard.services.contrast import ContrastBuildError, contrast_set_build

DEMO_CONTRAST_SYSTEM = "atlas-large"
"""The demo's best answer r_A of a contrast pair: atlas-large's, the usual winner (see
fixtures/README.md), since only the advice prompts are ranked."""


def demo_contrast_ensure(*, study: Study) -> str:
    """Build the demo study's contrast set (seed 0, the default window, atlas-large's answers as
    the best) and its items, unless they exist; say what there is, or why there is none."""
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
