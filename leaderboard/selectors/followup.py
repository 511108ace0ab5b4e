"""Reads behind the follow-up rationale-only study: the pairs where two judge runs disagree, the
better side of each, and which run voted it (AdvisorQA, Kim et al. 2024, Fig. 4)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from annotation.models import Pair, Study
from annotation.selectors.work import pair_better_side
from judges.models import JudgeRun
from leaderboard.lookup import rows_of_run
from leaderboard.selectors.frames import VoteFilters, study_votes_get
from leaderboard.stats.majority import people_majority

if TYPE_CHECKING:
    import pandas as pd

# Which disagreements a follow-up keeps: all, or those where the first (second) run voted the
# better side.
AGREEING = ("any", "first", "second")
AGREED = ("first", "second", "neither")


@dataclass(frozen=True)
class Disagreement:
    """A pair the two runs vote differently on (orders combined as the report does; a tie
    differs from A and B), in the pair's canonical terms.

    winner: the known better side (A or B), the one a follow-up shows; basis: where it is known
    from (``gold`` side, the pair's own shown winner ``set``, the answers' ``ranks``, else the
    ``people``'s decisive majority); agreed: the run whose vote is the winner (``first`` or
    ``second``), or ``neither`` when one run voted a tie and the other the worse side.
    """

    pair_id: int
    winner: str
    basis: str
    first_vote: str
    second_vote: str
    agreed: str


@dataclass(frozen=True)
class DisagreementCounts:
    """How many disagreements there are, by which run agreed with the better side and by basis;
    `unknown` counts the disagreements without a known better side (never followed up)."""

    first_label: str
    second_label: str
    total: int
    agreed: dict[str, int]
    basis: dict[str, int]
    unknown: int


def run_label(run: JudgeRun) -> str:
    """A run as a follow-up names it: its judge and its id."""
    return f"{run.judge.name} (run {run.pk})"


def _votes_of(judges: pd.DataFrame, run_id: int) -> pd.Series:
    import pandas as pd

    rows = rows_of_run(judges, run_id)
    return pd.Series(rows["label"].astype(str).to_numpy(), index=rows["pair_id"].to_numpy())


def _disagreements(
    *, study: Study, judge_a_run: JudgeRun, judge_b_run: JudgeRun
) -> tuple[list[Disagreement], int]:
    """The disagreements with a known better side, sorted by pair id, and how many lack one.

    Reads the two runs' votes and the people's with the report's selector (contrast items left
    out, the report's default raters); the people's majority is
    :func:`leaderboard.stats.majority.people_majority`, used where a pair has neither a gold
    side, a shown winner nor ranked answers, and only when it is A or B.
    """
    runs = tuple(sorted({judge_a_run.pk, judge_b_run.pk}))
    votes = study_votes_get(study=study, filters=VoteFilters(judge_run_ids=runs))
    first, second = _votes_of(votes.judges, judge_a_run.pk), _votes_of(votes.judges, judge_b_run.pk)
    both = first.index.intersection(second.index)
    differ = first.loc[both].to_numpy() != second.loc[both].to_numpy()
    differing = sorted(int(p) for p in both[differ])
    majority = people_majority(votes.human)
    pairs = Pair.objects.filter(study=study, pk__in=differing).select_related(
        "answer_a", "answer_b"
    )
    found, unknown = [], 0
    for pair in sorted(pairs, key=lambda p: p.pk):
        better = pair_better_side(pair=pair)
        if better is not None:
            winner, basis = better.side, better.basis
        elif majority.get(pair.pk) in ("A", "B"):
            winner, basis = str(majority.loc[pair.pk]), "people"
        else:
            unknown += 1
            continue
        vote_1, vote_2 = str(first.loc[pair.pk]), str(second.loc[pair.pk])
        agreed = "first" if vote_1 == winner else "second" if vote_2 == winner else "neither"
        found.append(
            Disagreement(
                pair_id=pair.pk,
                winner=winner,
                basis=basis,
                first_vote=vote_1,
                second_vote=vote_2,
                agreed=agreed,
            )
        )
    return found, unknown


def judge_disagreements_get(
    *, study: Study, judge_a_run: JudgeRun, judge_b_run: JudgeRun
) -> list[Disagreement]:
    """The study's pairs both runs voted on with different labels and a known better side,
    sorted by pair id (:class:`Disagreement` says which run agreed with it)."""
    return _disagreements(study=study, judge_a_run=judge_a_run, judge_b_run=judge_b_run)[0]


def judge_disagreement_counts(
    *, study: Study, judge_a_run: JudgeRun, judge_b_run: JudgeRun
) -> DisagreementCounts:
    """The disagreements counted by which run agreed with the better side and by its basis:
    what a researcher sees before creating a follow-up."""
    found, unknown = _disagreements(study=study, judge_a_run=judge_a_run, judge_b_run=judge_b_run)
    agreed = Counter(d.agreed for d in found)
    basis = Counter(d.basis for d in found)
    return DisagreementCounts(
        first_label=run_label(judge_a_run),
        second_label=run_label(judge_b_run),
        total=len(found),
        agreed={key: agreed[key] for key in AGREED},
        basis={key: basis[key] for key in ("gold", "ranks", "set", "people") if basis[key]},
        unknown=unknown,
    )
