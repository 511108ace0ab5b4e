"""Remedies for answers flagged for naming their own model or its maker.

A flagged answer stays out of pairs until a researcher reviews it and picks one remedy:

- *cleared*: the phrase does not give the system away (a false flag); the answer is used as is;
- *excluded*: left out of pairs for good;
- *edited*: workers and judges read an edited text, which the scan must find clean; the imported
  turns are kept in `original_turns` and shown only on the researcher's flagged-answer page;
- *noted*: kept as it is, with a note saying why; workers will read the name, and the launch
  checklist says so.

A remedy may be changed while the answer is in no pair (pairs and their judgments refer to the
text a worker read); after that it is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotation.leakscan import scan_answer
from annotation.models import Answer, Pair, Study, System
from annotation.selectors.studies import study_get_for_user
from core.errors import ApplicationError

Remedy = Answer.LeakRemedy


class LeakRemedyError(ApplicationError, ValueError):
    """A remedy that cannot be applied; the message says why, for the researcher."""


def answers_leak_clear(*, answers: QuerySet[Answer], user: User) -> int:
    """Clear flagged answers not yet reviewed, as reviewed by `user` now; return how many.

    Cleared answers become usable in pairs; the flag and its matches stay for the record.
    Answers not flagged, or already reviewed, are left as they are (one conditional UPDATE, so of
    two people clearing at once the first is recorded). The caller has checked `user`'s access.
    """
    return answers.filter(leak_flagged=True, leak_cleared_at__isnull=True).update(
        leak_cleared_by=user, leak_cleared_at=timezone.now(), leak_remedy=Remedy.CLEARED
    )


@transaction.atomic
def answer_leak_clear(*, answer: Answer, user: User) -> Answer:
    """Clear one flagged answer not yet reviewed, if `user` is a researcher of its study or an
    admin (idempotent: a second clear keeps the first reviewer); refresh and return `answer`.

    Anyone else gets PermissionDenied. To change a review, use `answer_leak_remedy`.
    """
    _check_reviewer(answer=answer, user=user)
    answers_leak_clear(answers=Answer.objects.filter(pk=answer.pk), user=user)
    answer.refresh_from_db(fields=["leak_cleared_by", "leak_cleared_at", "leak_remedy"])
    return answer


def _check_reviewer(*, answer: Answer, user: User) -> Study:
    study = Study.objects.get(prompts__answers=answer)
    try:
        study_get_for_user(user=user, slug=study.slug)
    except Study.DoesNotExist as exc:
        raise PermissionDenied(
            "Only the study's researchers and admins may review a flag."
        ) from exc
    return study


@transaction.atomic
def answer_leak_remedy(
    *,
    answer: Answer,
    user: User,
    remedy: str,
    note: str = "",
    edited_turns: Sequence[str] | None = None,
) -> Answer:
    """Apply `remedy` to a flagged answer as `user` now, and return the answer as stored.

    Only the study's researchers and admins may (PermissionDenied otherwise). Locks the answer
    row for the transaction; `answer` itself is refreshed too. Raises LeakRemedyError when the
    answer is not flagged, is already in a pair, an edit is missing, empty, unchanged or still
    names a model, or a note is missing for *noted*. Any remedy other than *edited* puts the
    imported text back.
    """
    study = _check_reviewer(answer=answer, user=user)
    if remedy not in Remedy.values:
        raise LeakRemedyError(f"Unknown remedy {remedy!r}.")
    locked = Answer.objects.select_for_update().get(pk=answer.pk)
    if not locked.leak_flagged:
        raise LeakRemedyError("This answer is not flagged.")
    in_pairs = Pair.objects.filter(Q(answer_a=locked) | Q(answer_b=locked)).count()
    if in_pairs:
        raise LeakRemedyError(
            f"This answer is already in {in_pairs} pairs, so its review can no longer change."
        )
    original = locked.original_turns if locked.original_turns is not None else locked.turns
    note = note.strip()
    if remedy == Remedy.EDITED:
        locked.turns = _checked_edit(study=study, original=original, edited=edited_turns)
        locked.original_turns = original
    else:
        locked.turns = original
        locked.original_turns = None
    if remedy == Remedy.NOTED and not note:
        raise LeakRemedyError("Say why the answer is kept as it is: the note is required.")
    locked.leak_remedy = remedy
    locked.leak_note = note
    locked.leak_cleared_by = user
    locked.leak_cleared_at = timezone.now()
    locked.save(
        update_fields=[
            "turns",
            "original_turns",
            "leak_remedy",
            "leak_note",
            "leak_cleared_by",
            "leak_cleared_at",
        ]
    )
    answer.refresh_from_db()
    return locked


def _checked_edit(*, study: Study, original: list[str], edited: Sequence[str] | None) -> list[str]:
    """The edited turns, if there is one non-empty text per turn and the scan finds them clean."""
    turns = [text.strip() for text in edited or []]
    if len(turns) != len(original) or not all(turns):
        raise LeakRemedyError(
            f"An edit needs a non-empty text for each of the {len(original)} turns."
        )
    if turns == [text.strip() for text in original]:
        raise LeakRemedyError("The edited text is the same as the original.")
    names = System.objects.filter(study=study).values_list("name", flat=True)
    still = scan_answer("\n\n".join(turns), system_names=tuple(names))
    if still:
        raise LeakRemedyError(
            "The edited text still names a model or its maker: "
            + "; ".join(still)
            + ". Edit it again, leave the answer out, or keep it with a note."
        )
    return turns
