"""The database itself keeps the study's invariants, whatever code writes to it."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.models import (
    Assignment,
    HumanJudgment,
    Pair,
    PayEntry,
    Preference,
    Study,
    Worker,
)
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair, make_prompt_with_answers


def judgment_kwargs(assignment: Assignment, **overrides: object) -> dict[str, object]:
    values: dict[str, object] = {
        "study": assignment.study,
        "pair": assignment.pair,
        "worker": assignment.worker,
        "assignment": assignment,
        "a_left": assignment.a_left,
        "likert_shown": 2,
        "likert": 2 if assignment.a_left else 7,
        "preference": Preference.A if assignment.a_left else Preference.B,
    }
    values.update(overrides)
    return values


@pytest.mark.parametrize("score", [0, 9])
def test_likert_outside_1_to_8_is_refused(cast: Cast, score: int) -> None:
    assignment = make_assignment(make_pair(cast.study), cast.worker_one)
    with pytest.raises(IntegrityError), transaction.atomic():
        HumanJudgment.objects.create(
            **judgment_kwargs(assignment, likert_shown=score, likert=score, preference="")
        )


def test_canonical_likert_must_mirror_the_shown_score_when_b_was_left(cast: Cast) -> None:
    assignment = make_assignment(make_pair(cast.study), cast.worker_one, a_left=False)
    with pytest.raises(IntegrityError), transaction.atomic():
        HumanJudgment.objects.create(
            **judgment_kwargs(assignment, likert_shown=2, likert=2, preference=Preference.A)
        )
    judgment = HumanJudgment.objects.create(**judgment_kwargs(assignment))
    assert (judgment.likert_shown, judgment.likert, judgment.preference) == (2, 7, "B")


def test_preference_must_follow_the_canonical_likert(cast: Cast) -> None:
    assignment = make_assignment(make_pair(cast.study), cast.worker_one)
    with pytest.raises(IntegrityError), transaction.atomic():
        HumanJudgment.objects.create(
            **judgment_kwargs(assignment, likert_shown=4, likert=4, preference=Preference.A)
        )


def test_one_judgment_per_assignment(cast: Cast) -> None:
    assignment = make_assignment(make_pair(cast.study), cast.worker_one)
    HumanJudgment.objects.create(**judgment_kwargs(assignment))
    with pytest.raises(IntegrityError), transaction.atomic():
        HumanJudgment.objects.create(**judgment_kwargs(assignment))


def test_one_open_assignment_per_worker_and_pair(cast: Cast) -> None:
    pair = make_pair(cast.study)
    make_assignment(pair, cast.worker_one)
    with pytest.raises(IntegrityError), transaction.atomic():
        make_assignment(pair, cast.worker_one)
    # Another worker may hold the same pair, which is what overlap means.
    make_assignment(pair, cast.worker_two)


def test_an_expired_assignment_does_not_block_a_new_one(cast: Cast) -> None:
    pair = make_pair(cast.study)
    first = make_assignment(pair, cast.worker_one)
    Assignment.objects.filter(pk=first.pk).update(status=Assignment.Status.EXPIRED)
    make_assignment(pair, cast.worker_one)
    assert Assignment.objects.filter(pair=pair, worker=cast.worker_one).count() == 2


def test_a_live_judgment_needs_an_assignment_but_an_imported_one_does_not(cast: Cast) -> None:
    pair = make_pair(cast.study)
    rater = Worker.objects.create(
        study=cast.study, panel=Worker.Panel.IMPORTED, external_id="expert_7"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        HumanJudgment.objects.create(study=cast.study, pair=pair, worker=rater, preference="A")
    imported = HumanJudgment.objects.create(
        study=cast.study, pair=pair, worker=rater, preference="tie", is_imported=True
    )
    assert imported.likert is None and imported.a_left is None


def test_pay_is_never_negative_and_paid_once_per_judgment(cast: Cast) -> None:
    assignment = make_assignment(make_pair(cast.study), cast.worker_one)
    judgment = HumanJudgment.objects.create(**judgment_kwargs(assignment))
    with pytest.raises(IntegrityError), transaction.atomic():
        PayEntry.objects.create(
            study=cast.study, worker=cast.worker_one, kind="bonus", amount_cents=-5
        )
    PayEntry.objects.create(
        study=cast.study,
        worker=cast.worker_one,
        judgment=judgment,
        kind="judgment",
        amount_cents=15,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        PayEntry.objects.create(
            study=cast.study,
            worker=cast.worker_one,
            judgment=judgment,
            kind="judgment",
            amount_cents=15,
        )


def test_study_pay_and_overlap_are_checked(db: None) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.create(slug="s", name="s", overlap=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.create(slug="s", name="s", gold_share="1.5")


def test_external_ids_are_unique_per_study_and_panel(cast: Cast) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Worker.objects.create(
            study=cast.study, panel=Worker.Panel.PROLIFIC, external_id="PID-wendy-worker"
        )
    Worker.objects.create(
        study=cast.other_study, panel=Worker.Panel.PROLIFIC, external_id="PID-wendy-worker"
    )


def test_pairs_are_stored_in_canonical_order_and_once_per_turn(cast: Cast) -> None:
    prompt, (first, second) = make_prompt_with_answers(cast.study)
    low, high = sorted([first, second], key=lambda answer: answer.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        Pair.objects.create(study=cast.study, prompt=prompt, answer_a=high, answer_b=low)
    Pair.objects.create(study=cast.study, prompt=prompt, answer_a=low, answer_b=high)
    with pytest.raises(IntegrityError), transaction.atomic():
        Pair.objects.create(study=cast.study, prompt=prompt, answer_a=low, answer_b=high)
    Pair.objects.create(study=cast.study, prompt=prompt, answer_a=low, answer_b=high, turn=2)


def test_a_gold_pair_must_name_its_better_side(cast: Cast) -> None:
    prompt, (first, second) = make_prompt_with_answers(cast.study)
    low, high = sorted([first, second], key=lambda answer: answer.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        Pair.objects.create(
            study=cast.study, prompt=prompt, answer_a=low, answer_b=high, is_gold=True
        )
