"""Reads of the annotation flow: a worker's progress, gold accuracy, and what an item shows.

Everything here is safe to show the worker it belongs to: no system names, no other worker's
judgments, no judge verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.db import connection
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Assignment, HumanJudgment, Pair, Preference, Study, Worker
from annotation.rendering import markdown_render_safe
from core.db.prepared import PreparedSelect
from core.db.rows import relation_attach, relation_loaded


@dataclass(frozen=True)
class Progress:
    done: int
    target: int

    @property
    def finished(self) -> bool:
        return self.done >= self.target


@dataclass(frozen=True)
class GoldScore:
    checked: int
    correct: int

    @property
    def accuracy(self) -> Decimal | None:
        """Share of gold pairs answered on the known better side; None before any."""
        if self.checked == 0:
            return None
        return Decimal(self.correct) / Decimal(self.checked)


def worker_progress(*, worker: Worker) -> Progress:
    """Judgments the worker has submitted, against the study's target per worker."""
    done = Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED).count()
    return Progress(done=done, target=worker.study.target_per_worker)


def worker_held_until(*, worker: Worker) -> datetime | None:
    """When the worker's open reservation expires, if they hold one."""
    return (
        Assignment.objects.filter(
            worker=worker, status=Assignment.Status.RESERVED, expires_at__gt=timezone.now()
        )
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first()
    )


@dataclass(frozen=True)
class HeldElsewhere:
    """Pairs a worker could still take once others' reservations on them run out.

    `pairs`: regular pairs this worker never had whose submitted judgments are under the
    overlap; `frees_at`: when the first reservation on one of them expires (None when none is
    held: a slot is free now).
    """

    pairs: int
    frees_at: datetime | None


_HELD_ELSEWHERE = """
SELECT count(*), min(t.frees_at)
FROM annotation_pair p
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE a.status = 'submitted') AS submitted,
           min(a.expires_at) FILTER (WHERE a.status = 'reserved' AND a.expires_at > %(now)s)
               AS frees_at
    FROM annotation_assignment a WHERE a.pair_id = p.id
) t
WHERE p.study_id = %(study)s AND NOT p.is_gold AND t.submitted < %(overlap)s
  AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                  WHERE m.pair_id = p.id AND m.worker_id = %(worker)s)
"""


def worker_pairs_held_elsewhere(*, worker: Worker) -> HeldElsewhere:
    """The regular pairs this worker could still take, though a claim found none free now.

    A claim that finds nothing counts live reservations as taken slots; this read counts only
    submitted judgments, so what it finds is held by other workers (or freed in between). Read
    only when a claim came back empty, never on the per-item path. A worker who is done,
    returned or blocked takes no more pairs: none for them.
    """
    if worker.state not in (Worker.State.ACTIVE, Worker.State.WARNED):
        return HeldElsewhere(pairs=0, frees_at=None)
    study = worker.study
    with connection.cursor() as cursor:
        cursor.execute(
            _HELD_ELSEWHERE,
            {
                "now": timezone.now(),
                "study": study.pk,
                "overlap": study.overlap,
                "worker": worker.pk,
            },
        )
        pairs, frees_at = cursor.fetchone()
    return HeldElsewhere(pairs=pairs, frees_at=frees_at)


def worker_gold_score(*, worker: Worker) -> GoldScore:
    """Gold accuracy from the worker's judgments on gold pairs that carry a preference.

    A tie on a gold pair counts as wrong: gold pairs are chosen to have a clear better side.
    """
    counts = (
        HumanJudgment.objects.filter(worker=worker, pair__is_gold=True, is_imported=False)
        .exclude(preference="")
        .aggregate(
            checked=Count("pk"), correct=Count("pk", filter=Q(preference=F("pair__gold_side")))
        )
    )
    return GoldScore(checked=counts["checked"], correct=counts["correct"])


def worker_get_for_user(*, study: Study, user_id: int | None) -> Worker | None:
    """The worker profile a logged-in user holds in a study, if any."""
    if user_id is None:
        return None
    return Worker.objects.select_related("study").filter(study=study, user_id=user_id).first()


def worker_get_in_study(*, slug: str, user_id: int | None) -> Worker | None:
    """The worker profile a logged-in user holds in the study with this slug, with the study,
    in one query; None when there is no such study or the user holds no profile in it."""
    if user_id is None:
        return None
    return _WORKER_IN_STUDY.first(slug, user_id)


_WORKER_IN_STUDY: PreparedSelect[Worker] = PreparedSelect(
    lambda slug, user_id: Worker.objects.select_related("study").filter(
        study__slug=slug, user_id=user_id
    )
)


# What an item shows, read with its assignment in one joined query.
ITEM_RELATED = ("study", "pair__prompt", "pair__answer_a", "pair__answer_b")


@dataclass(frozen=True)
class HeldAssignment:
    """One of a worker's assignments and the count of their submitted ones (their progress)."""

    assignment: Assignment
    done: int


def assignment_get_for_worker(*, worker: Worker, public_id: UUID) -> HeldAssignment | None:
    """One of the worker's own assignments, with what its item shows and the worker's submitted
    count, in one query; another worker's id finds nothing."""
    assignment = _WORKERS_ASSIGNMENT.first(worker.pk, public_id)
    if assignment is None:
        return None
    done: int = assignment.done  # type: ignore[attr-defined]  # the query's annotation
    return HeldAssignment(assignment=assignment, done=done)


_WORKERS_ASSIGNMENT: PreparedSelect[Assignment] = PreparedSelect(
    lambda worker_id, public_id: (
        Assignment.objects.select_related(*ITEM_RELATED)
        .filter(worker_id=worker_id, public_id=public_id)
        .annotate(
            done=Coalesce(
                Subquery(
                    Assignment.objects.filter(
                        worker_id=OuterRef("worker_id"), status=Assignment.Status.SUBMITTED
                    )
                    .order_by()
                    .values("worker_id")
                    .annotate(count=Count("pk"))
                    .values("count")
                ),
                0,
            )
        )
    )
)


@dataclass(frozen=True)
class BetterSide:
    """The side ('A' or 'B') known to be better, and where that is known from: ``gold`` (the gold
    side), ``set`` (the pair's own `rationale_winner`, set by a follow-up study) or ``ranks``."""

    side: str
    basis: str


def pair_better_side(*, pair: Pair) -> BetterSide | None:
    """The pair's known better side: the gold side, else the pair's own `rationale_winner`,
    else the answers' ranks (1 = best; equal or missing ranks say nothing); never a judge."""
    if pair.is_gold and pair.gold_side in (Preference.A, Preference.B):
        return BetterSide(side=pair.gold_side, basis="gold")
    if pair.rationale_winner in (Preference.A, Preference.B):
        return BetterSide(side=pair.rationale_winner, basis="set")
    rank_a, rank_b = pair.answer_a.rank, pair.answer_b.rank
    if rank_a is None or rank_b is None or rank_a == rank_b:
        return None
    return BetterSide(side=Preference.A if rank_a < rank_b else Preference.B, basis="ranks")


def pair_rationale_winner(*, pair: Pair) -> str | None:
    """The side ('A' or 'B') a rationale-only form presents as the winner, if it is known
    (:func:`pair_better_side`)."""
    better = pair_better_side(pair=pair)
    return better.side if better is not None else None


@dataclass(frozen=True)
class Turn:
    number: int
    html: str


@dataclass(frozen=True)
class WorkItem:
    """What a worker sees of one assignment: texts by side and an opaque id, nothing else."""

    public_id: UUID
    prompt_turns: tuple[Turn, ...]
    left_turns: tuple[Turn, ...]
    right_turns: tuple[Turn, ...]
    winner_side: str  # "left" or "right" in rationale-only mode, else ""
    expires_at: datetime


_ITEM: PreparedSelect[Assignment] = PreparedSelect(
    lambda pk: Assignment.objects.select_related(*ITEM_RELATED).filter(pk=pk)
)
# The same without the study, for a caller that has read it.
_ITEM_OF_STUDY: PreparedSelect[Assignment] = PreparedSelect(
    lambda pk: Assignment.objects.select_related(
        *(name for name in ITEM_RELATED if name != "study")
    ).filter(pk=pk)
)


def work_item_build(*, assignment: Assignment, study: Study | None = None) -> WorkItem:
    """Render one assignment for its worker: prompt turns and both answers in shown order.

    An assignment whose pair is not loaded yet (as the claim returns it) is read again with its
    pair, prompt and both answers in one joined query, and with its study unless the caller
    gives it: `study`, the assignment's study as the caller read it in this request (the API's,
    read with the worker).
    """
    if not relation_loaded(assignment, "pair"):
        if study is not None and study.pk == assignment.study_id:
            loaded = _ITEM_OF_STUDY.first(assignment.pk)
            if loaded is not None:
                relation_attach(loaded, "study", study)
        else:
            loaded = _ITEM.first(assignment.pk)
        if loaded is None:
            raise Assignment.DoesNotExist(f"Assignment {assignment.pk} no longer exists.")
        assignment = loaded
    pair = assignment.pair
    upto = max(pair.turn, 1)

    links_as_text = assignment.study.links_as_text

    def turns(texts: list[str]) -> tuple[Turn, ...]:
        return tuple(
            Turn(number=i + 1, html=markdown_render_safe(text, links_as_text=links_as_text))
            for i, text in enumerate((texts or [])[:upto])
        )

    a_turns, b_turns = turns(pair.answer_a.turns), turns(pair.answer_b.turns)
    left, right = (a_turns, b_turns) if assignment.a_left else (b_turns, a_turns)
    winner_side = ""
    if assignment.study.form_rationale_only:
        winner = pair_rationale_winner(pair=pair)
        if winner is not None:
            winner_side = "left" if (winner == Preference.A) == assignment.a_left else "right"
    return WorkItem(
        public_id=assignment.public_id,
        prompt_turns=turns(pair.prompt.turns),
        left_turns=left,
        right_turns=right,
        winner_side=winner_side,
        expires_at=assignment.expires_at,
    )
