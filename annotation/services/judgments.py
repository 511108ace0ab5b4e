"""Saving a worker's answer to the forms for one assignment.

The worker only ever sees "left" and "right"; this module turns what was shown into canonical
A/B terms (the Likert score, acceptability and axes), so the views and the API never do.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import (
    FINE_GRAINED_AXES,
    Acceptability,
    Assignment,
    HumanJudgment,
    PayEntry,
    Preference,
    Study,
    Worker,
)
from annotation.selectors.work import pair_rationale_winner
from annotation.services.errors import (
    AssignmentClosed,
    AssignmentExpired,
    AssignmentNotFound,
    JudgmentInvalid,
)
from annotation.services.workers import worker_gold_check
from core.conventions import SEVEN_VALUE_KEYS, likert_collapse, likert_mirror
from core.db.prepared import PreparedSelect, prepared_cursor
from core.db.rows import mark_saved, model_insert

T = TypeVar("T")

AXIS_LEVELS: frozenset[str] = frozenset({"no", "partial", "yes"})
MAX_TEXT = 5000


def likert_preference(likert: int) -> str:
    """Collapse a canonical Likert score: 1-3 A, 4-5 tie, 6-8 B (core.conventions)."""
    return Preference(likert_collapse(likert))


@dataclass(frozen=True)
class Submitted:
    """A saved judgment and the worker's submitted count with it (their progress)."""

    judgment: HumanJudgment
    done: int


def judgment_submit(
    *,
    assignment_public_id: UUID,
    worker: Worker,
    submission_id: UUID,
    likert_shown: int | None = None,
    values: Sequence[str] = (),
    reason: str = "",
    acceptability_left: str = "",
    acceptability_right: str = "",
    axes_left: Mapping[str, str] | None = None,
    axes_right: Mapping[str, str] | None = None,
    comment: str = "",
) -> Submitted:
    """Save the worker's judgment on one of their assignments; return it with their progress.

    Idempotent on `submission_id`: a replay (double click, back button, network retry) returns
    the judgment first saved. Locks the assignment row. Refuses with AssignmentExpired after
    the reservation's expiry (the slot has gone back to the pool), AssignmentClosed when the item
    was released or already answered, AssignmentNotFound for an id that is not the worker's own,
    JudgmentInvalid naming the field for a form that breaks the study's rules. Creates a pending
    pay entry at the study's rate and re-checks the worker's gold accuracy.
    """
    replay = _replay(worker=worker, submission_id=submission_id)
    if replay is not None:
        return _replayed(replay)
    try:
        with transaction.atomic():
            return _submit_locked(
                assignment_public_id=assignment_public_id,
                worker=worker,
                submission_id=submission_id,
                likert_shown=likert_shown,
                values=values,
                reason=reason,
                acceptability_left=acceptability_left,
                acceptability_right=acceptability_right,
                axes_left=axes_left,
                axes_right=axes_right,
                comment=comment,
            )
    except IntegrityError:
        # The same submission id won a race on another assignment row: answer as a replay.
        replay = _replay(worker=worker, submission_id=submission_id)
        if replay is None:
            raise
        return _replayed(replay)


def _replayed(judgment: HumanJudgment) -> Submitted:
    """A replay's answer: the first judgment, with the worker's count read afresh."""
    done = Assignment.objects.filter(
        worker_id=judgment.worker_id, status=Assignment.Status.SUBMITTED
    ).count()
    return Submitted(judgment=judgment, done=done)


def _replay(*, worker: Worker, submission_id: UUID) -> HumanJudgment | None:
    existing = _JUDGMENT_OF_SUBMISSION.first(submission_id)
    if existing is None:
        return None
    if existing.worker_id != worker.pk:
        raise AssignmentNotFound("No such item.")
    return existing


# The submit's reads, compiled once per process (core.db.prepared).
_LOCKED_ASSIGNMENT: PreparedSelect[Assignment] = PreparedSelect(
    lambda public_id, worker_id: (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("pair", "pair__answer_a", "pair__answer_b", "study")
        .filter(public_id=public_id, worker_id=worker_id)
    ),
    for_update=True,
)
_JUDGMENT_OF_ASSIGNMENT: PreparedSelect[HumanJudgment] = PreparedSelect(
    lambda assignment_id: HumanJudgment.objects.filter(assignment_id=assignment_id)
)
_JUDGMENT_OF_SUBMISSION: PreparedSelect[HumanJudgment] = PreparedSelect(
    lambda submission_id: HumanJudgment.objects.filter(submission_id=submission_id)
)


def _submit_locked(
    *,
    assignment_public_id: UUID,
    worker: Worker,
    submission_id: UUID,
    likert_shown: int | None,
    values: Sequence[str],
    reason: str,
    acceptability_left: str,
    acceptability_right: str,
    axes_left: Mapping[str, str] | None,
    axes_right: Mapping[str, str] | None,
    comment: str,
) -> Submitted:
    now = timezone.now()
    assignment = _LOCKED_ASSIGNMENT.first(assignment_public_id, worker.pk)
    if assignment is None:
        raise AssignmentNotFound("No such item.")
    # Under the lock: a concurrent double click has either committed its judgment or not begun.
    existing = _JUDGMENT_OF_ASSIGNMENT.first(assignment.pk)
    if existing is not None:
        if existing.submission_id == submission_id:
            return _replayed(existing)
        raise AssignmentClosed("You already answered this item; your first answer was kept.")
    if assignment.status == Assignment.Status.RETURNED:
        raise AssignmentClosed("This item was released and can no longer be answered.")
    if assignment.status == Assignment.Status.SKIPPED:
        raise AssignmentClosed("You skipped this item, so this answer was not saved.")
    if assignment.status == Assignment.Status.EXPIRED or assignment.expires_at <= now:
        raise AssignmentExpired(
            "The time for this item ran out and it went back to the pool, so this answer was "
            "not saved. Please continue with the next item."
        )

    study = assignment.study
    a_left = assignment.a_left
    fields = _validated_fields(
        study=study,
        assignment=assignment,
        likert_shown=likert_shown,
        values=values,
        reason=reason,
        acceptability_left=acceptability_left,
        acceptability_right=acceptability_right,
        axes_left=axes_left,
        axes_right=axes_right,
        comment=comment,
    )
    judgment = HumanJudgment(
        study=study,
        pair=assignment.pair,
        worker=worker,
        assignment=assignment,
        submission_id=submission_id,
        a_left=a_left,
        duration_ms=int((now - assignment.reserved_at).total_seconds() * 1000),
        **fields,
    )
    pay = PayEntry(
        study=study,
        worker=worker,
        kind=PayEntry.Kind.JUDGMENT,
        amount_cents=study.pay_per_judgment_cents,
    )
    sql, params = _submit_statement(judgment=judgment, pay=pay, assignment=assignment, now=now)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        judgment_id, done = cursor.fetchone()
    if done is None:
        # Released or expired meanwhile: nothing of this submit stays (the transaction rolls
        # back the judgment).
        raise AssignmentClosed("This item can no longer be answered.")
    mark_saved(judgment, pk=judgment_id)
    if assignment.pair.is_gold:
        worker_gold_check(worker=worker)
    return Submitted(judgment=judgment, done=done)


# The submit's three writes in one statement: the judgment; the assignment marked submitted while
# it is still reserved (a conditional UPDATE: no row when it was released or expired meanwhile),
# which also counts the worker's other submitted assignments for their progress; and the pay
# entry, written only when the assignment was marked. The columns and values are the models' own
# (core.db.rows.model_insert: every concrete field but the primary key, each value as Django's
# INSERT would send it), so
# the rows are those HumanJudgment.objects.create and PayEntry.objects.create would write.
# The count reads the statement's snapshot, which predates the UPDATE, hence the + 1; the
# worker holds at most one open reservation, so no other submit of theirs can race it.
_SUBMIT = """
WITH judgment AS (
    INSERT INTO {judgment_table} ({judgment_columns}) VALUES ({judgment_values}) RETURNING id
), marked AS (
    UPDATE "annotation_assignment" SET status = 'submitted', submitted_at = %s
    WHERE id = %s AND status = 'reserved'
    RETURNING (SELECT count(*) + 1 FROM "annotation_assignment" d
               WHERE d.worker_id = %s AND d.status = 'submitted') AS done
), pay AS (
    INSERT INTO {pay_table} ({pay_columns}) SELECT {pay_values} FROM judgment, marked
)
SELECT judgment.id, marked.done FROM judgment LEFT JOIN marked ON true
"""


@functools.cache
def _submit_sql() -> str:
    judgment, pay = model_insert(HumanJudgment), model_insert(PayEntry)
    return _SUBMIT.format(
        judgment_table=judgment.table,
        judgment_columns=", ".join(judgment.columns),
        judgment_values=", ".join("%s" for _ in judgment.columns),
        pay_table=pay.table,
        pay_columns=", ".join(pay.columns),
        pay_values=", ".join("judgment.id" if a == "judgment_id" else "%s" for a in pay.attnames),
    )


def _submit_statement(
    *, judgment: HumanJudgment, pay: PayEntry, assignment: Assignment, now: datetime
) -> tuple[str, list[Any]]:
    params = [
        *model_insert(HumanJudgment).values(judgment),
        now,
        assignment.pk,
        assignment.worker_id,
        *model_insert(PayEntry).values(pay, skip=("judgment_id",)),
    ]
    return _submit_sql(), params


def _validated_preference(
    *, study: Study, assignment: Assignment, likert_shown: int | None
) -> tuple[int | None, str]:
    """The canonical Likert score (None when none is asked) and the collapsed preference ("" for
    a study that asks neither), from the rating as shown or the pair's known better side."""
    if study.form_rationale_only:
        if likert_shown is not None:
            raise JudgmentInvalid(
                "This study shows the better answer; no rating is asked.", field="likert_shown"
            )
        winner = pair_rationale_winner(pair=assignment.pair)
        if winner is None:
            raise JudgmentInvalid("This item has no known better answer.", field="likert_shown")
        return None, winner
    if study.form_likert:
        if likert_shown is None or isinstance(likert_shown, bool):
            raise JudgmentInvalid("Choose a rating from 1 to 8.", field="likert_shown")
        if not 1 <= likert_shown <= 8:
            raise JudgmentInvalid(
                f"The rating must be from 1 to 8, not {likert_shown}.", field="likert_shown"
            )
        likert = likert_shown if assignment.a_left else likert_mirror(likert_shown)
        return likert, likert_preference(likert)
    if likert_shown is not None:
        raise JudgmentInvalid("This study does not ask for a rating.", field="likert_shown")
    return None, ""


def _validated_values(
    *, study: Study, preference: str, values: Sequence[str], reason: str
) -> list[str]:
    """The cited values, each once in the order given, checked against the study's rationale
    form and the preference (reasons only for a winner); the free-text reason's length too."""
    value_list = list(dict.fromkeys(values))
    unknown = sorted(set(value_list).difference(SEVEN_VALUE_KEYS))
    if unknown:
        raise JudgmentInvalid(f"Unknown value(s): {', '.join(unknown)}.", field="values")
    asks_values = study.form_rationale_only or study.form_values
    if not asks_values and (value_list or reason.strip()):
        raise JudgmentInvalid("This study does not ask why.", field="values")
    if (
        asks_values
        and study.values_required
        and preference in (Preference.A, Preference.B)
        and not value_list
    ):
        raise JudgmentInvalid(
            "Pick at least one reason why the better answer is better.", field="values"
        )
    if asks_values and preference == Preference.TIE and value_list:
        raise JudgmentInvalid(
            "Reasons are asked only when one answer is better; clear them for a tie.",
            field="values",
        )
    if len(reason) > MAX_TEXT:
        raise JudgmentInvalid(f"The reason is longer than {MAX_TEXT} characters.", field="reason")
    return value_list


def _validated_fields(
    *,
    study: Study,
    assignment: Assignment,
    likert_shown: int | None,
    values: Sequence[str],
    reason: str,
    acceptability_left: str,
    acceptability_right: str,
    axes_left: Mapping[str, str] | None,
    axes_right: Mapping[str, str] | None,
    comment: str,
) -> dict[str, object]:
    """Check the form against the study's settings; return the judgment's canonical fields.

    The checks run in the form's order (rating, reasons, acceptability, axes, comment), so the
    first wrong field is the one named."""
    a_left = assignment.a_left
    likert, preference = _validated_preference(
        study=study, assignment=assignment, likert_shown=likert_shown
    )
    value_list = _validated_values(study=study, preference=preference, values=values, reason=reason)

    acceptability_a, acceptability_b = _shown_to_canonical(
        a_left, acceptability_left, acceptability_right
    )
    if study.form_acceptability:
        for field, value in (
            ("acceptability_left", acceptability_left),
            ("acceptability_right", acceptability_right),
        ):
            if value not in Acceptability.values:
                raise JudgmentInvalid(
                    "Choose accept, reject or unsure for each answer.", field=field
                )
    elif acceptability_left or acceptability_right:
        raise JudgmentInvalid(
            "This study does not ask about acceptability.", field="acceptability_left"
        )

    axes: dict[str, dict[str, str]] = {}
    if study.form_axes:
        left = _validated_axes(axes_left, field="axes_left")
        right = _validated_axes(axes_right, field="axes_right")
        axes_a, axes_b = _shown_to_canonical(a_left, left, right)
        axes = {"a": axes_a, "b": axes_b}
    elif axes_left or axes_right:
        raise JudgmentInvalid("This study does not ask about the axes.", field="axes_left")

    if comment and not study.form_comment:
        raise JudgmentInvalid("This study does not take comments.", field="comment")
    if len(comment) > MAX_TEXT:
        raise JudgmentInvalid(f"The comment is longer than {MAX_TEXT} characters.", field="comment")
    return {
        "likert_shown": likert_shown if likert is not None else None,
        "likert": likert,
        "preference": preference,
        "values": value_list,
        "reason": reason.strip(),
        "acceptability_a": acceptability_a,
        "acceptability_b": acceptability_b,
        "axes": axes,
        "comment": comment.strip(),
    }


def judgment_preview_check(
    *,
    assignment: Assignment,
    likert_shown: int | None = None,
    values: Sequence[str] = (),
    reason: str = "",
    acceptability_left: str = "",
    acceptability_right: str = "",
    axes_left: Mapping[str, str] | None = None,
    axes_right: Mapping[str, str] | None = None,
    comment: str = "",
    submission_id: UUID | None = None,
) -> dict[str, object]:
    """Check a preview's answer by the same rules as a real one; write nothing.

    `assignment` is an unsaved one built for the researcher's preview: it never reaches the
    database, so no slot is held, nothing is counted and no pay is owed. Raises JudgmentInvalid.
    """
    return _validated_fields(
        study=assignment.study,
        assignment=assignment,
        likert_shown=likert_shown,
        values=values,
        reason=reason,
        acceptability_left=acceptability_left,
        acceptability_right=acceptability_right,
        axes_left=axes_left,
        axes_right=axes_right,
        comment=comment,
    )


def _shown_to_canonical(a_left: bool, left: T, right: T) -> tuple[T, T]:
    """Return (A, B) from what was shown on the left and right."""
    return (left, right) if a_left else (right, left)


def _validated_axes(axes: Mapping[str, str] | None, *, field: str) -> dict[str, str]:
    given = dict(axes or {})
    missing = [axis for axis in FINE_GRAINED_AXES if given.get(axis) not in AXIS_LEVELS]
    if missing:
        raise JudgmentInvalid(
            f"Rate {', '.join(missing)} as no, partial or yes for each answer.", field=field
        )
    extra = sorted(set(given) - set(FINE_GRAINED_AXES))
    if extra:
        raise JudgmentInvalid(f"Unknown axis: {', '.join(extra)}.", field=field)
    return {axis: given[axis] for axis in FINE_GRAINED_AXES}
