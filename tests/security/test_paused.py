"""A held item submitted after the study was paused is saved and paid (docs/security.md);
no new item is handed out while the study is paused."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import HumanJudgment, PayEntry, Study
from annotation.services.assignments import assignment_claim_next
from annotation.services.errors import StudyNotOpen
from tests.annotation.work_helpers import make_pairs, submit
from tests.conftest import Cast


def test_a_held_item_submitted_after_a_pause_is_saved_and_no_new_item_follows(cast: Cast) -> None:
    study = cast.study
    study.gold_share = Decimal(0)
    study.save()
    make_pairs(study, 3)
    held = assignment_claim_next(worker=cast.worker_one)
    assert held is not None
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    cast.worker_one.study.refresh_from_db()
    judgment = submit(held, likert_shown=3)
    assert HumanJudgment.objects.filter(pk=judgment.pk).exists()
    assert PayEntry.objects.filter(judgment=judgment).exists()
    with pytest.raises(StudyNotOpen):
        assignment_claim_next(worker=cast.worker_one)
