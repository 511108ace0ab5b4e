"""A follow-up rationale-only study from the pairs where two judge runs disagree (AdvisorQA, Kim et
al. 2024, sampled 300 such pairs and asked people why the better answer is better, Fig. 4).

The pairs are chosen here (:mod:`leaderboard.selectors.followup` reads the disagreements); the
annotation app copies them into the new study (`annotation.services.followup`); this module then
records, in its own tables, where the follow-up came from and which run agreed with the better
side of each pair, so that the follow-up's report can split the people's values by it.
"""

from __future__ import annotations

import random

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Study
from annotation.services.followup import followup_study_copy
from judges.models import JudgeRun
from leaderboard.models import Followup, FollowupPair
from leaderboard.selectors.followup import (
    AGREEING,
    Disagreement,
    judge_disagreements_get,
    run_label,
)

FLIP = {"A": "B", "B": "A", "tie": "tie"}


def _notes(
    *,
    study: Study,
    first: JudgeRun,
    second: JudgeRun,
    agreeing: str,
    chosen: list[Disagreement],
    candidates: int,
    seed: int,
) -> str:
    which = {
        Followup.Agreeing.ANY: "",
        Followup.Agreeing.FIRST: f" and {run_label(first)} voted the better side",
        Followup.Agreeing.SECOND: f" and {run_label(second)} voted the better side",
    }[Followup.Agreeing(agreeing)]
    groups = {g: sum(d.agreed == g for d in chosen) for g in FollowupPair.Agreed.values}
    return (
        f"Follow-up of {study.slug}: {len(chosen)} of the {candidates} pairs where "
        f"{run_label(first)} and {run_label(second)} vote differently{which}, sampled with seed "
        f"{seed}. The better answer shown comes from the gold side or the answers' ranks, else "
        f"from the people's majority. The first run voted it on {groups['first']} pairs, the "
        f"second on {groups['second']}, neither (a tie against the worse side) on "
        f"{groups['neither']}."
    )


@transaction.atomic
def followup_study_create(
    *,
    study: Study,
    judge_a_run: JudgeRun,
    judge_b_run: JudgeRun,
    agreeing: str = Followup.Agreeing.ANY,
    sample_size: int = 300,
    seed: int = 0,
    user: User,
) -> Study:
    """Create a draft rationale-only study of up to `sample_size` pairs where the two runs
    disagree, sampled with `seed`, and make `user` a member.

    `agreeing` keeps the disagreements where the first run (`first`) or the second (`second`)
    voted the known better side, or all of them (`any`). The annotation app copies the pairs
    (:func:`annotation.services.followup.followup_study_copy`, which locks the original study's
    row); a `Followup` row and one `FollowupPair` per copy record the origin, in the same
    transaction.
    """
    if judge_a_run.study_id != study.pk or judge_b_run.study_id != study.pk:
        raise ValidationError("Both judge runs must belong to the study.")
    if judge_a_run.pk == judge_b_run.pk:
        raise ValidationError("Choose two different judge runs.")
    if agreeing not in AGREEING:
        raise ValidationError(f"agreeing must be one of {list(AGREEING)}, not {agreeing!r}.")
    if sample_size < 1:
        raise ValidationError(f"The sample size must be at least 1, not {sample_size}.")
    found = judge_disagreements_get(study=study, judge_a_run=judge_a_run, judge_b_run=judge_b_run)
    if agreeing != Followup.Agreeing.ANY:
        found = [d for d in found if d.agreed == agreeing]
    if not found:
        which = "" if agreeing == Followup.Agreeing.ANY else f" where the {agreeing} run agreed"
        raise ValidationError(
            f"The two runs disagree on no pair with a known better answer{which}; nothing to "
            "follow up."
        )
    chosen = sorted(
        random.Random(seed).sample(found, min(sample_size, len(found))), key=lambda d: d.pair_id
    )
    copied = followup_study_copy(
        study=study,
        winners={d.pair_id: d.winner for d in chosen},
        notes=_notes(
            study=study,
            first=judge_a_run,
            second=judge_b_run,
            agreeing=agreeing,
            chosen=chosen,
            candidates=len(found),
            seed=seed,
        ),
        user=user,
    )
    origin = Followup.objects.create(
        study=copied.study,
        source_study=study,
        first_run=judge_a_run,
        second_run=judge_b_run,
        first_label=run_label(judge_a_run),
        second_label=run_label(judge_b_run),
        agreeing=agreeing,
        sample_size=sample_size,
        seed=seed,
        candidates=len(found),
        created_by=user,
    )
    copies = dict(
        copied.study.pairs.filter(pk__in=copied.pair_of.values()).values_list(
            "pk", "rationale_winner"
        )
    )
    links = []
    for d in chosen:
        pair_id = copied.pair_of[d.pair_id]
        # The copy names its sides anew when its answers' ids come in the other order.
        flipped = copies[pair_id] != d.winner
        links.append(
            FollowupPair(
                followup=origin,
                pair_id=pair_id,
                source_pair_id=d.pair_id,
                basis=d.basis,
                agreed=d.agreed,
                first_vote=FLIP[d.first_vote] if flipped else d.first_vote,
                second_vote=FLIP[d.second_vote] if flipped else d.second_vote,
            )
        )
    FollowupPair.objects.bulk_create(links)
    return copied.study
