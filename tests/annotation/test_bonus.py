"""Bonuses pay only what Prolific's reward does not: hand-made ledgers, the CSV and the page."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import PayEntry, Study, Worker
from annotation.selectors.bonus import BonusArithmetic, study_bonus_lines, study_reward_cents
from tests.conftest import PASSWORD, Cast


def ledger(
    worker: Worker, *, judgments: int, each: int, gold: int = 0, status: str = "approved"
) -> None:
    """Hand-made ledger lines: `judgments` entries of `each` cents, and a gold bonus if given."""
    for _ in range(judgments):
        PayEntry.objects.create(
            study=worker.study, worker=worker, kind="judgment", amount_cents=each, status=status
        )
    if gold:
        PayEntry.objects.create(
            study=worker.study, worker=worker, kind="bonus", amount_cents=gold, status=status
        )


def prolific_csv(study: Study) -> list[list[str]]:
    client = Client()
    assert client.login(username="rhea-researcher", password=PASSWORD)
    response = client.get(f"/studies/{study.slug}/payouts.csv?format=prolific")
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.content.decode())))


@pytest.fixture
def study(cast: Cast) -> Study:
    """8 judgments at 20 cents a session: the session pay, and so the default reward, is $1.60."""
    Study.objects.filter(pk=cast.study.pk).update(target_per_worker=8, pay_per_judgment_cents=20)
    cast.study.refresh_from_db()
    return cast.study


def test_the_bonus_is_the_gold_bonus_alone_when_the_reward_pays_the_judgments(
    cast: Cast, study: Study
) -> None:
    # The ledger: 8 judgments x 20 cents and a 50-cent gold bonus. The reward pays the
    # $1.60 of judgments; the old CSV said 2.10, paying them a second time.
    ledger(cast.worker_one, judgments=8, each=20, gold=50)
    assert study_reward_cents(study=study) == 160
    assert prolific_csv(study) == [["PID-wendy-worker", "0.50"]]


def test_a_reward_below_the_session_pay_leaves_the_rest_of_the_judgments_to_the_bonus(
    cast: Cast, study: Study
) -> None:
    # A study that pays per judgment: a $1.00 reward, the rest of the 8 x 20 cents as bonus.
    Study.objects.filter(pk=study.pk).update(prolific_reward_cents=100)
    ledger(cast.worker_one, judgments=8, each=20, gold=50)
    ledger(cast.worker_two, judgments=3, each=20)  # 60 cents, all inside the reward
    assert prolific_csv(study) == [["PID-wendy-worker", "1.10"]]


def test_pending_and_rejected_pay_is_not_in_the_bonus(cast: Cast, study: Study) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_reward_cents=0)
    ledger(cast.worker_one, judgments=2, each=20, gold=50, status="pending")
    ledger(cast.worker_two, judgments=2, each=20, gold=50, status="rejected")
    ledger(cast.worker_two, judgments=1, each=20)
    assert prolific_csv(study) == [["PID-walt-worker", "0.20"]]
    lines = {line.worker_id: line for line in study_bonus_lines(study=study)}
    one = lines[cast.worker_one.pk]
    assert one.arithmetic.pending_cents == 90 and one.arithmetic.due_cents == 0


def test_a_returned_participant_gets_no_reward_so_the_bonus_pays_their_judgments(
    cast: Cast, study: Study
) -> None:
    Worker.objects.filter(pk=cast.worker_one.pk).update(state=Worker.State.RETURNED)
    ledger(cast.worker_one, judgments=3, each=20, gold=50)
    ledger(cast.worker_two, judgments=3, each=20, gold=50)
    assert prolific_csv(study) == [["PID-walt-worker", "0.50"], ["PID-wendy-worker", "1.10"]]


def test_participants_from_other_panels_are_not_in_the_prolific_file(
    cast: Cast, study: Study
) -> None:
    invited = Worker.objects.create(
        study=study,
        user=User.objects.create_user(username="invitee"),
        panel=Worker.Panel.INVITE,
        external_id="nonce",
    )
    ledger(invited, judgments=1, each=20, gold=50)
    assert prolific_csv(study) == []


def test_the_bonus_subtracts_what_was_already_sent_and_is_never_negative() -> None:
    arithmetic = BonusArithmetic(
        judgments=10, judgment_cents=200, reward_cents=160, gold_cents=50, already_cents=30,
        pending_cents=0,
    )  # fmt: skip
    assert arithmetic.above_reward_cents == 40
    assert arithmetic.due_cents == 60
    overpaid = BonusArithmetic(
        judgments=2, judgment_cents=40, reward_cents=160, gold_cents=0, already_cents=50,
        pending_cents=0,
    )  # fmt: skip
    assert overpaid.above_reward_cents == 0 and overpaid.due_cents == 0


def test_the_pay_page_shows_each_participants_arithmetic(cast: Cast, study: Study) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_reward_cents=100)
    ledger(cast.worker_one, judgments=8, each=20, gold=50)
    client = Client()
    assert client.login(username="rhea-researcher", password=PASSWORD)
    page = client.get(f"/studies/{study.slug}/workers/").content.decode()
    row = page[page.index(f'id="bonus-{cast.worker_one.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "8 = 160¢" in row
    assert "max(0, 160 − 100) = 60¢" in row
    assert "50 + 60 = 110¢" in row
    assert "reward of <strong>100¢</strong>" in page
