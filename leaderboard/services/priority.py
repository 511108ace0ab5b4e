"""Each regular pair's priority for active selection, recomputed by the analysis worker.

Run by the task leaderboard.pair_priorities_recompute (after a judge run of an active study
finishes, and every few minutes by beat for every live active study); the pairs' rows are
written by the annotation app's own service (annotation.services.priority).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from annotation.models import HumanJudgment, Pair, Study
from annotation.services.priority import pair_priorities_store
from core.tasks import SoftTimeLimitExceeded
from judges.models import JudgeCall
from leaderboard.stats.active import NEYMAN_FLOOR, judge_call_strata, neyman_priority

logger = logging.getLogger(__name__)

LABELS = ("A", "tie", "B")


@dataclass(frozen=True)
class PrioritiesComputed:
    study_id: int
    pairs: int
    pool: int
    total: float


def pair_priorities_compute(*, study: Study) -> dict[int, float]:
    """Return each regular pair's priority in [0, 1] from the study's current rows: Neyman's
    allocation over the judges' agreement strata (leaderboard.stats.active.neyman_priority).

    Formula: every regular pair falls into a stratum by the collapsed verdicts (A, tie, B) of
    every done judge call on it, all judges and both orders together (judge_call_strata):
    the verdict a tie (at least half the calls) or not, the calls disputed or not; a pair
    without a call is unjudged. Each human vote on a judged regular pair (excluded workers left
    out) agrees by ``a``, the share of the pair's calls naming the person's label, and

        priority = max(S_h, NEYMAN_FLOOR) / (1/2),   S_h = sqrt(pbar_h (1 - pbar_h)),
        pbar_h = (sum_{votes in h} a + 1) / (votes in h + 2),

    the floor (0.1) for an unjudged pair. The claim draws ``e / k + (1 - e) p / W``, so the
    non-uniform part of the draw takes each stratum in proportion to ``N_h S_h``, uniformly
    within it. Deterministic: the same rows give the same priorities.
    """
    pairs = list(
        Pair.objects.filter(study=study, is_gold=False).order_by("pk").values_list("pk", flat=True)
    )
    if not pairs:
        return {}
    index = {pk: i for i, pk in enumerate(pairs)}
    column = {label: j for j, label in enumerate(LABELS)}
    judge_counts = np.zeros((len(pairs), len(LABELS)))
    calls = JudgeCall.objects.filter(
        run__study=study, status=JudgeCall.Status.DONE, pair__is_gold=False
    ).exclude(preference="")
    for pair_id, preference in calls.values_list("pair_id", "preference").iterator():
        if pair_id in index and preference in column:
            judge_counts[index[pair_id], column[preference]] += 1
    strata = judge_call_strata(judge_counts)
    votes = HumanJudgment.objects.filter(study=study, excluded=False, pair__is_gold=False).exclude(
        preference=""
    )
    label_strata: list[int] = []
    label_agree: list[float] = []
    for pair_id, preference in votes.values_list("pair_id", "preference").iterator():
        i = index.get(pair_id)
        if i is None or preference not in column or strata[i] < 0:
            continue
        label_strata.append(int(strata[i]))
        label_agree.append(judge_counts[i, column[preference]] / judge_counts[i].sum())
    priority = neyman_priority(strata, label_strata, label_agree, floor=NEYMAN_FLOOR)
    return {pk: float(priority[i]) for pk, i in index.items()}


def pair_priorities_recompute(*, study_id: int, seed: int | None = None) -> PrioritiesComputed:
    """Recompute and store the priorities of one study's regular pairs (any selection mode:
    a study switched to active finds them ready). The keys are drawn afresh from `seed`
    (None: unseeded), so each recompute is a new weighted draw order."""
    study = Study.objects.get(pk=study_id)
    priorities = pair_priorities_compute(study=study)
    stored = pair_priorities_store(study=study, priorities=priorities, seed=seed)
    return PrioritiesComputed(study.pk, stored.pairs, stored.pool, stored.total)


def pair_priorities_refresh() -> int:
    """Recompute the priorities of every live study with active selection; return how many.

    A study that fails is logged and the others go on (the next beat tries it again)."""
    done = 0
    studies = Study.objects.filter(status=Study.Status.LIVE, selection=Study.Selection.ACTIVE)
    for study_id in studies.values_list("pk", flat=True):
        try:
            pair_priorities_recompute(study_id=study_id)
        except SoftTimeLimitExceeded:
            # The task's time is up: stop here, not at the next study (core.tasks).
            raise
        except Exception:  # noqa: BLE001 - one study's failure must not stop the others
            logger.exception("pair priorities of study %s could not be recomputed", study_id)
            continue
        done += 1
    return done
