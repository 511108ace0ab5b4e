"""Submitting a judgment: canonical scores, idempotency, expiry, validation, pay and gold checks."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from annotation.models import Assignment, HumanJudgment, PayEntry, Study, Worker
from annotation.services.assignments import assignment_claim_next
from annotation.services.errors import (
    AssignmentClosed,
    AssignmentExpired,
    AssignmentNotFound,
    JudgmentInvalid,
    WorkerBlocked,
)
from annotation.services.judgments import judgment_submit
from tests.annotation.work_helpers import answer_gold, make_pairs, submit
from tests.conftest import Cast


def claim(worker: Worker) -> Assignment:
    assignment = assignment_claim_next(worker=worker)
    assert assignment is not None
    return assignment


@pytest.fixture
def study(cast: Cast) -> Study:
    cast.study.gold_share = Decimal(0)
    cast.study.pay_per_judgment_cents = 25
    cast.study.save()
    make_pairs(cast.study, 4)
    return cast.study


@pytest.mark.parametrize(("a_left", "shown", "canonical", "preference"), [
    (True, 2, 2, "A"),
    (False, 2, 7, "B"),
    (False, 4, 5, "tie"),
    (True, 8, 8, "B"),
])  # fmt: skip
def test_the_score_is_stored_as_shown_and_in_canonical_terms(
    cast: Cast, study: Study, a_left: bool, shown: int, canonical: int, preference: str
) -> None:
    assignment = claim(cast.worker_one)
    Assignment.objects.filter(pk=assignment.pk).update(a_left=a_left)
    judgment = submit(assignment, likert_shown=shown)
    assert (judgment.a_left, judgment.likert_shown) == (a_left, shown)
    assert (judgment.likert, judgment.preference) == (canonical, preference)


def test_a_replayed_submission_returns_the_same_judgment_and_pays_once(
    cast: Cast, study: Study
) -> None:
    assignment = claim(cast.worker_one)
    submission_id = uuid.uuid4()
    first = submit(assignment, submission_id=submission_id, likert_shown=2)
    again = submit(assignment, submission_id=submission_id, likert_shown=7)
    assert again.pk == first.pk and again.likert_shown == 2
    assert HumanJudgment.objects.filter(assignment=assignment).count() == 1
    assert PayEntry.objects.filter(worker=cast.worker_one).count() == 1


def test_a_second_answer_with_a_new_submission_id_is_refused(cast: Cast, study: Study) -> None:
    assignment = claim(cast.worker_one)
    submit(assignment)
    with pytest.raises(AssignmentClosed, match="already answered"):
        submit(assignment)


def test_a_late_submission_after_expiry_is_refused_and_never_counted(
    cast: Cast, study: Study
) -> None:
    assignment = claim(cast.worker_one)
    Assignment.objects.filter(pk=assignment.pk).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    with pytest.raises(AssignmentExpired, match="time for this item ran out"):
        submit(assignment)
    assert not HumanJudgment.objects.exists()
    assert not PayEntry.objects.exists()


def test_another_workers_assignment_is_not_found(cast: Cast, study: Study) -> None:
    assignment = claim(cast.worker_one)
    with pytest.raises(AssignmentNotFound):
        submit(Assignment(public_id=assignment.public_id, worker=cast.worker_two), likert_shown=1)
    assert not HumanJudgment.objects.exists()


def test_a_released_item_cannot_be_answered(cast: Cast, study: Study) -> None:
    assignment = claim(cast.worker_one)
    Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.RETURNED)
    with pytest.raises(AssignmentClosed, match="released"):
        submit(assignment)


@pytest.mark.parametrize("shown", [None, 0, 9])
def test_a_missing_or_out_of_range_score_is_refused_naming_the_field(
    cast: Cast, study: Study, shown: int | None
) -> None:
    assignment = claim(cast.worker_one)
    with pytest.raises(JudgmentInvalid) as error:
        submit(assignment, likert_shown=shown)
    assert error.value.field == "likert_shown"


def test_the_time_on_task_is_measured_on_the_server(cast: Cast, study: Study) -> None:
    assignment = claim(cast.worker_one)
    Assignment.objects.filter(pk=assignment.pk).update(
        reserved_at=timezone.now() - timedelta(seconds=42)
    )
    judgment = submit(assignment)
    assert judgment.duration_ms is not None
    assert 42_000 <= judgment.duration_ms < 52_000


def test_each_judgment_earns_a_pending_pay_entry_at_the_study_rate(
    cast: Cast, study: Study
) -> None:
    judgment = submit(claim(cast.worker_one))
    entry = PayEntry.objects.get(judgment=judgment)
    assert (entry.kind, entry.status, entry.amount_cents) == ("judgment", "pending", 25)
    assert entry.worker == cast.worker_one


def test_the_one_statement_submit_writes_the_rows_the_models_describe(
    cast: Cast, study: Study
) -> None:
    # Every form on, so that every column of the judgment carries a value of its own.
    Study.objects.filter(pk=study.pk).update(
        form_values=True, form_acceptability=True, form_axes=True, form_comment=True
    )
    assignment = claim(cast.worker_one)
    Assignment.objects.filter(pk=assignment.pk).update(a_left=False)
    axes_left = {"relevance": "yes", "usefulness": "partial", "factuality": "no"}
    axes_right = {"relevance": "no", "usefulness": "yes", "factuality": "partial"}
    submitted = judgment_submit(
        assignment_public_id=assignment.public_id,
        worker=cast.worker_one,
        submission_id=uuid.uuid4(),
        likert_shown=2,
        values=["empathy", "relevance"],
        reason="  kinder  ",
        acceptability_left="accept",
        acceptability_right="unsure",
        axes_left=axes_left,
        axes_right=axes_right,
        comment="a note",
    )
    returned = submitted.judgment
    assert not returned._state.adding and returned.pk is not None
    stored = HumanJudgment.objects.get(pk=returned.pk)
    # The row read back equals the instance the service built and returned, field by field.
    for field in HumanJudgment._meta.concrete_fields:
        assert getattr(stored, field.attname) == getattr(returned, field.attname), field.name
    assert (stored.likert_shown, stored.likert, stored.preference) == (2, 7, "B")
    assert stored.values == ["empathy", "relevance"] and stored.reason == "kinder"
    assert (stored.acceptability_a, stored.acceptability_b) == ("unsure", "accept")
    assert stored.axes == {"a": axes_right, "b": axes_left}
    assert stored.assignment_id == assignment.pk and stored.is_imported is False
    assert stored.excluded is False and stored.created_at is not None
    # The pay entry, as PayEntry.objects.create with the model's defaults would write it.
    (entry,) = PayEntry.objects.filter(worker=cast.worker_one)
    assert (entry.judgment_id, entry.study_id, entry.kind) == (stored.pk, study.pk, "judgment")
    assert (entry.amount_cents, entry.status, entry.reason) == (25, "pending", "")
    assert entry.created_at is not None
    marked = Assignment.objects.get(pk=assignment.pk)
    assert marked.status == Assignment.Status.SUBMITTED and marked.submitted_at is not None
    assert submitted.done == 1


class TestSevenValues:
    @pytest.fixture(autouse=True)
    def values_on(self, study: Study) -> None:
        study.form_values = True
        study.save()

    def test_values_are_required_after_a_preference(self, cast: Cast) -> None:
        with pytest.raises(JudgmentInvalid, match="at least one reason") as error:
            submit(claim(cast.worker_one), likert_shown=2)
        assert error.value.field == "values"

    def test_a_study_can_make_the_values_optional_and_a_preference_then_needs_none(
        self, cast: Cast, study: Study
    ) -> None:
        study.values_required = False
        study.save()
        judgment = submit(claim(cast.worker_one), likert_shown=2)
        assert judgment.preference in ("A", "B") and judgment.values == []

    def test_values_and_reason_are_stored_about_the_winner(self, cast: Cast) -> None:
        judgment = submit(
            claim(cast.worker_one),
            likert_shown=2,
            values=["empathy", "clarity", "empathy"],
            reason="  Kinder tone.  ",
        )
        assert judgment.values == ["empathy", "clarity"]
        assert judgment.reason == "Kinder tone."

    def test_an_unknown_value_is_named_in_the_error(self, cast: Cast) -> None:
        with pytest.raises(JudgmentInvalid, match="brevity"):
            submit(claim(cast.worker_one), likert_shown=2, values=["relevance", "brevity"])

    def test_values_are_not_taken_for_a_tie(self, cast: Cast) -> None:
        with pytest.raises(JudgmentInvalid, match="tie"):
            submit(claim(cast.worker_one), likert_shown=4, values=["relevance"])
        assert submit(claim(cast.worker_one), likert_shown=5).preference == "tie"


def test_rationale_only_records_the_known_winner_and_the_reasons(cast: Cast, study: Study) -> None:
    study.form_rationale_only = True
    study.form_likert = False
    study.save()
    judgment = submit(claim(cast.worker_one), likert_shown=None, values=["actionability"])
    # make_pairs ranks the first system's answer 1; that answer is A or B by id order.
    pair = judgment.pair
    expected = "A" if pair.answer_a.rank == 1 else "B"
    assert (judgment.likert, judgment.preference, judgment.values) == (
        None,
        expected,
        ["actionability"],
    )


@pytest.mark.parametrize(("form", "answer", "field", "message"), [
    ({"form_rationale_only": True, "form_likert": False},
     {"likert_shown": 2, "values": ["empathy"]}, "likert_shown", "no rating is asked"),
    ({"form_likert": False, "form_comment": True}, {"likert_shown": 2, "comment": "Fine."},
     "likert_shown", "does not ask for a rating"),
    ({}, {"likert_shown": 2, "reason": "Kinder tone."}, "values", "does not ask why"),
    ({"form_values": True}, {"likert_shown": 2, "values": ["empathy"], "reason": "x" * 5001},
     "reason", "longer than 5000"),
    ({"form_comment": False}, {"likert_shown": 2, "comment": "Fine."}, "comment",
     "does not take comments"),
])  # fmt: skip
def test_an_answer_the_study_does_not_ask_for_is_refused_naming_the_field(
    cast: Cast,
    study: Study,
    form: dict[str, bool],
    answer: dict[str, object],
    field: str,
    message: str,
) -> None:
    Study.objects.filter(pk=study.pk).update(**form)
    assignment = claim(cast.worker_one)
    with pytest.raises(JudgmentInvalid, match=message) as error:
        submit(assignment, **answer)
    assert error.value.field == field
    assert not HumanJudgment.objects.exists()


def test_acceptability_and_axes_are_stored_for_answers_a_and_b(cast: Cast, study: Study) -> None:
    study.form_acceptability = True
    study.form_axes = True
    study.save()
    assignment = claim(cast.worker_one)
    Assignment.objects.filter(pk=assignment.pk).update(a_left=False)
    judgment = submit(
        assignment,
        likert_shown=1,
        acceptability_left="accept",
        acceptability_right="reject",
        axes_left={"relevance": "yes", "usefulness": "yes", "factuality": "partial"},
        axes_right={"relevance": "no", "usefulness": "no", "factuality": "no"},
    )
    # B was on the left.
    assert (judgment.acceptability_a, judgment.acceptability_b) == ("reject", "accept")
    assert judgment.axes["b"]["factuality"] == "partial"
    assert judgment.axes["a"] == {"relevance": "no", "usefulness": "no", "factuality": "no"}


def test_missing_acceptability_is_refused_naming_the_side(cast: Cast, study: Study) -> None:
    study.form_acceptability = True
    study.save()
    with pytest.raises(JudgmentInvalid) as error:
        submit(claim(cast.worker_one), acceptability_left="accept", acceptability_right="maybe")
    assert error.value.field == "acceptability_right"


class TestGoldChecks:
    @pytest.fixture
    def gold_study(self, cast: Cast) -> Study:
        study = cast.study
        study.gold_share = Decimal(1)
        study.gold_min_items = 3
        study.gold_warn_accuracy = Decimal("0.8")
        study.gold_block_accuracy = Decimal("0.5")
        study.save()
        make_pairs(study, 3, gold=6)
        return study

    def test_a_worker_under_the_block_threshold_gets_no_more_work(
        self, cast: Cast, gold_study: Study
    ) -> None:
        for correctly in (False, False, True):
            answer_gold(claim(cast.worker_one), correctly=correctly)
        cast.worker_one.refresh_from_db()
        assert cast.worker_one.state == Worker.State.BLOCKED
        assert "1/3" in cast.worker_one.state_reason
        with pytest.raises(WorkerBlocked):
            assignment_claim_next(worker=cast.worker_one)

    def test_no_one_is_blocked_before_the_minimum_number_of_gold_items(
        self, cast: Cast, gold_study: Study
    ) -> None:
        for _ in range(2):
            answer_gold(claim(cast.worker_one), correctly=False)
        cast.worker_one.refresh_from_db()
        assert cast.worker_one.state == Worker.State.ACTIVE

    def test_a_worker_between_the_thresholds_is_warned_and_keeps_working(
        self, cast: Cast, gold_study: Study
    ) -> None:
        for correctly in (True, True, False, True):
            answer_gold(claim(cast.worker_one), correctly=correctly)
        cast.worker_one.refresh_from_db()
        assert cast.worker_one.state == Worker.State.WARNED
        assert assignment_claim_next(worker=cast.worker_one) is not None
