"""Each regular pair's priority for active selection, recomputed by the analysis worker.

Run by the task leaderboard.pair_priorities_recompute (after a judge run of an active study
finishes, and every few minutes by beat for every live active study); the pairs' rows are
written by the annotation app's own service (annotation.services.priority).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from annotation.models import HumanJudgment, Pair, Study
from annotation.services.priority import pair_priorities_store
from core.tasks import SoftTimeLimitExceeded
from judges.models import JudgeCall
from leaderboard.stats.active import PriorityWeights, pair_priority, priority_terms
from leaderboard.stats.bradley_terry import bradley_terry

logger = logging.getLogger(__name__)

LABELS = ("A", "tie", "B")
_WINNER = {"A": "model_a", "tie": "tie", "B": "model_b"}
# Bootstrap rounds of the people's leaderboard whose intervals give the overlap term: enough to
# tell overlapping from separated systems, cheap enough to rerun every few minutes.
OVERLAP_ROUNDS = 100
# Votes per system before the people's leaderboard gives intervals: below it, nothing separates
# the systems yet and every pair's overlap term is 1.
OVERLAP_MIN_VOTES_PER_SYSTEM = 5


@dataclass(frozen=True)
class PrioritiesComputed:
    study_id: int
    pairs: int
    pool: int
    total: float


def pair_priorities_compute(*, study: Study, seed: int = 0) -> dict[int, float]:
    """Return each regular pair's priority in [0, 1] from the study's current rows.

    Formula (leaderboard.stats.active.pair_priority with equal weights):
    ``priority = (t_judge + t_overlap + t_human + t_coverage) / 4``, where
    - ``t_judge`` (judges disagree): the disagreement share of the collapsed verdicts (A, tie,
      B) of every done judge call on the pair, all judges and both orders together;
      ``(1 - m / n) / (1 - ceil(n / 3) / n)`` with n verdicts and m the modal count, 0 below 2;
    - ``t_overlap`` (the systems' leaderboard intervals overlap): the overlap of the 95%
      bootstrap intervals (``OVERLAP_ROUNDS`` rounds, ``seed``) of the pair's two systems in
      the people's Bradley-Terry leaderboard, intersection over the shorter interval; 1 while
      the study has fewer than ``OVERLAP_MIN_VOTES_PER_SYSTEM`` (5) human votes per system
      (nothing separates them yet);
    - ``t_human`` (people disagree): the same disagreement share over the pair's human votes
      (excluded workers left out);
    - ``t_coverage`` (under-covered category): ``max(0, 1 - r_c / r)``, with ``r_c`` the human
      votes per pair in the pair's prompt category and ``r`` over all regular pairs.
    """
    pairs = list(
        Pair.objects.filter(study=study, is_gold=False)
        .order_by("pk")
        .values_list("pk", "prompt__category", "answer_a__system_id", "answer_b__system_id")
    )
    if not pairs:
        return {}
    index = {pk: i for i, (pk, _, _, _) in enumerate(pairs)}
    column = {label: j for j, label in enumerate(LABELS)}
    judge_counts = np.zeros((len(pairs), len(LABELS)))
    calls = JudgeCall.objects.filter(
        run__study=study, status=JudgeCall.Status.DONE, pair__is_gold=False
    ).exclude(preference="")
    for pair_id, preference in calls.values_list("pair_id", "preference").iterator():
        if pair_id in index and preference in column:
            judge_counts[index[pair_id], column[preference]] += 1
    human_counts = np.zeros((len(pairs), len(LABELS)))
    votes = HumanJudgment.objects.filter(study=study, excluded=False, pair__is_gold=False).exclude(
        preference=""
    )
    battles: list[tuple[int, int, str]] = []
    system_of = {pk: (a, b) for pk, _, a, b in pairs}
    for pair_id, preference in votes.values_list("pair_id", "preference").iterator():
        if pair_id in index and preference in column:
            human_counts[index[pair_id], column[preference]] += 1
            a, b = system_of[pair_id]
            battles.append((a, b, _WINNER[preference]))
    systems = sorted({s for _, _, a, b in pairs for s in (a, b)})
    lower = dict.fromkeys(systems, np.nan)
    upper = dict.fromkeys(systems, np.nan)
    if len(battles) >= OVERLAP_MIN_VOTES_PER_SYSTEM * len(systems):
        frame = pd.DataFrame(battles, columns=["model_a", "model_b", "winner"])
        frame["model_a"] = frame["model_a"].astype(str)
        frame["model_b"] = frame["model_b"].astype(str)
        board = bradley_terry(frame, rounds=OVERLAP_ROUNDS, seed=seed).set_index("model")
        for system in systems:
            if str(system) in board.index:
                lower[system] = float(board["lower"].loc[str(system)])
                upper[system] = float(board["upper"].loc[str(system)])
    terms = priority_terms(
        judge_counts=judge_counts,
        human_counts=human_counts,
        lower_a=[lower[a] for _, _, a, _ in pairs],
        upper_a=[upper[a] for _, _, a, _ in pairs],
        lower_b=[lower[b] for _, _, _, b in pairs],
        upper_b=[upper[b] for _, _, _, b in pairs],
        categories=np.array([category for _, category, _, _ in pairs], dtype=object),
    )
    priority = pair_priority(terms, PriorityWeights())
    return {pk: float(priority[i]) for pk, i in index.items()}


def pair_priorities_recompute(*, study_id: int, seed: int | None = None) -> PrioritiesComputed:
    """Recompute and store the priorities of one study's regular pairs (any selection mode:
    a study switched to active finds them ready). The keys are drawn afresh from `seed`
    (None: unseeded), so each recompute is a new weighted draw order."""
    study = Study.objects.get(pk=study_id)
    priorities = pair_priorities_compute(study=study, seed=seed or 0)
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
