"""Participants cannot be made up or taken over, and the entry limits hold for a launch."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from annotation.models import EntryLog, HumanJudgment, PayEntry, Study, Worker
from annotation.selectors.quality import study_worker_quality
from annotation.services.entry import entry_link_signature
from tests.annotation.work_helpers import make_pairs
from tests.conftest import PASSWORD, Cast

PROLIFIC_ID = "64f1c2e3a4b5c6d7e8f90123"
PROMPT_TEXT = "Q0?"
ANSWER_TEXT = "first answer"


@pytest.fixture
def study(cast: Cast) -> Study:
    study = cast.study
    study.gold_share = Decimal(0)
    study.target_per_worker = 3
    study.prolific_study_id = PROLIFIC_ID
    study.completion_code = "FULLCODE"
    study.partial_completion_code = "PARTCODE"
    study.instructions = "Secret instructions text."
    study.save()
    make_pairs(study, 4)
    return study


def link(
    study: Study, pid: str, *, session: str = "SESS1", study_id: str = PROLIFIC_ID, **extra: str
) -> str:
    params = {"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session, **extra}
    return f"/work/{study.slug}/enter/prolific/?{urlencode(params)}"


def consent(client: Client, study: Study) -> None:
    assert client.post(f"/work/{study.slug}/consent/", {"agree": "yes"}).status_code == 302


def content_free(body: bytes) -> bool:
    return all(
        text.encode() not in body for text in (PROMPT_TEXT, ANSWER_TEXT, "Secret instructions")
    )


def test_a_made_up_study_id_is_refused_without_showing_anything_and_logged(
    client: Client, study: Study
) -> None:
    response = client.get(link(study, "madeup", study_id="not-this-study"))
    assert response.status_code == 403
    assert content_free(response.content)
    assert not Worker.objects.filter(external_id="madeup").exists()
    (entry,) = EntryLog.objects.filter(study=study)
    assert entry.outcome == EntryLog.Outcome.REFUSED and entry.panel_study_id == "not-this-study"
    # Nothing was let in, so the next page is refused too.
    assert client.get(f"/work/{study.slug}/").status_code == 403


def test_prolific_entry_is_refused_while_the_study_has_no_prolific_id(
    client: Client, study: Study
) -> None:
    Study.objects.filter(pk=study.pk).update(prolific_study_id="")
    response = client.get(link(study, "P1"))
    assert response.status_code == 403 and b"not open to Prolific" in response.content


@pytest.mark.parametrize("status", [Study.Status.DRAFT, Study.Status.PAUSED, Study.Status.CLOSED])
def test_entry_to_a_study_that_is_not_live_reveals_no_content(
    client: Client, study: Study, status: str
) -> None:
    Study.objects.filter(pk=study.pk).update(status=status)
    response = client.get(link(study, "P1"), follow=True)
    assert content_free(response.content)
    assert b"not taking judgments" in response.content
    assert not Worker.objects.filter(external_id="P1").exists()


def test_a_study_that_requires_a_signed_link_refuses_the_bare_link(
    client: Client, study: Study
) -> None:
    Study.objects.filter(pk=study.pk).update(entry_link_required=True)
    study.refresh_from_db()
    assert client.get(link(study, "P1")).status_code == 403
    assert client.get(link(study, "P1", sig="0" * 32)).status_code == 403
    signed = client.get(link(study, "P1", sig=entry_link_signature(study=study)))
    assert signed.status_code == 302 and signed["Location"].endswith("/consent/")


def test_a_new_entry_link_key_invalidates_the_old_signed_link(client: Client, study: Study) -> None:
    Study.objects.filter(pk=study.pk).update(entry_link_required=True)
    study.refresh_from_db()
    old = entry_link_signature(study=study)
    Study.objects.filter(pk=study.pk).update(entry_link_key="rotated-key")
    study.refresh_from_db()
    assert client.get(link(study, "P1", sig=old)).status_code == 403


def test_taking_over_an_idle_participant_with_another_session_id_is_refused_and_logged(
    study: Study,
) -> None:
    owner, attacker = Client(), Client()
    assert owner.get(link(study, "PIDOWNER", session="REAL")).status_code == 302
    consent(owner, study)
    assert owner.get(f"/work/{study.slug}/").status_code == 302  # holds an item
    Worker.objects.filter(external_id="PIDOWNER").update(
        last_seen_at=timezone.now() - timedelta(hours=2)
    )
    response = attacker.get(link(study, "PIDOWNER", session="GUESSED"))
    assert response.status_code == 403
    assert content_free(response.content)
    assert EntryLog.objects.filter(
        external_id="PIDOWNER", outcome=EntryLog.Outcome.TAKEOVER_REFUSED
    ).exists()
    # The owner's browser is still the bound one.
    assert owner.get(f"/work/{study.slug}/").status_code == 302


def test_the_same_session_id_may_rebind_from_a_new_browser_after_the_idle_time(
    study: Study,
) -> None:
    lost, new = Client(), Client()
    assert lost.get(link(study, "PID1", session="REAL")).status_code == 302
    Worker.objects.filter(external_id="PID1").update(
        last_seen_at=timezone.now() - timedelta(hours=2)
    )
    assert new.get(link(study, "PID1", session="REAL")).status_code == 302
    assert lost.get(f"/work/{study.slug}/consent/").status_code == 403


def test_an_entry_link_never_replaces_a_researchers_session(client: Client, study: Study) -> None:
    assert client.login(username="rhea-researcher", password=PASSWORD)
    response = client.get(link(study, "P1"))
    assert response.status_code == 409 and b"Sign out first" in response.content
    assert not Worker.objects.filter(external_id="P1").exists()
    assert client.get(f"/studies/{study.slug}/").status_code == 200  # still the researcher


def test_an_entry_link_never_replaces_an_admins_session(client: Client, study: Study) -> None:
    assert client.login(username="ada-admin", password=PASSWORD)
    assert client.get(link(study, "P1")).status_code == 409


def test_garbage_from_one_address_does_not_lock_out_a_real_participant(
    client: Client, study: Study, settings
) -> None:
    settings.CONCORD_ENTRY_REFUSED_PER_ADDRESS_PER_MINUTE = 5
    statuses = [client.get(link(study, f"BAD{i}", study_id="wrong")).status_code for i in range(8)]
    assert statuses[:5] == [403] * 5 and statuses[5:] == [429] * 3
    # Refusals past the limit are not written: the log cannot be flooded.
    assert EntryLog.objects.filter(study=study).count() == 5
    assert Client().get(link(study, "REAL1")).status_code == 302
    assert client.get(link(study, "REAL2")).status_code == 302


def test_the_study_budget_of_entries_limits_good_entries_per_minute(study: Study, settings) -> None:
    Study.objects.filter(pk=study.pk).update(entry_attempts_per_minute=3)
    study.refresh_from_db()
    statuses = [
        Client(REMOTE_ADDR=f"10.0.0.{i}").get(link(study, f"P{i}")).status_code for i in range(4)
    ]
    assert statuses == [302, 302, 302, 429]
    assert EntryLog.objects.filter(outcome=EntryLog.Outcome.RATE_LIMITED).count() == 1


def test_the_default_budget_admits_a_launch_of_hundreds_behind_a_trusted_proxy(
    study: Study, settings
) -> None:
    settings.CONCORD_TRUSTED_PROXIES = ["10.1.0.0/16"]
    # 150 participants in one minute through one proxy: the old limit was 30 for all of them.
    statuses = {
        Client(REMOTE_ADDR="10.1.0.5", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}")
        .get(link(study, f"LAUNCH{i}", session=f"S{i}"))
        .status_code
        for i in range(150)
    }
    assert statuses == {302}
    assert study.entry_attempts_per_minute >= 500


def test_without_a_trusted_proxy_a_forwarded_header_is_ignored(study: Study, settings) -> None:
    settings.CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE = 2
    statuses = [
        Client(HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").get(link(study, f"P{i}")).status_code
        for i in range(3)
    ]
    assert statuses == [302, 302, 429]


def test_behind_a_trusted_proxy_each_client_address_counts_apart(study: Study, settings) -> None:
    settings.CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE = 2
    settings.CONCORD_TRUSTED_PROXIES = ["127.0.0.1"]
    statuses = [
        Client(HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").get(link(study, f"P{i}")).status_code
        for i in range(3)
    ]
    assert statuses == [302, 302, 302]
    # A client cannot forge its way past the proxy: only the right-most untrusted hop counts.
    forged = [
        Client(HTTP_X_FORWARDED_FOR=f"1.2.3.{i}, 198.51.100.7")
        .get(link(study, f"F{i}"))
        .status_code
        for i in range(3)
    ]
    assert forged == [302, 302, 429]


def test_many_ids_from_one_address_are_flagged_suspicious_with_their_entry_log(
    client: Client, cast: Cast, study: Study
) -> None:
    for i in range(3):
        assert Client(REMOTE_ADDR="192.0.2.9").get(link(study, f"FAKE{i}")).status_code == 302
    assert Client(REMOTE_ADDR="192.0.2.50").get(link(study, "HONEST")).status_code == 302
    flags = {row.worker.external_id: row.flags for row in study_worker_quality(study=study)}
    assert "suspicious" in flags["FAKE0"] and "3 ids from one address" in flags["FAKE0"]
    assert "suspicious" not in flags["HONEST"]
    assert client.login(username="rhea-researcher", password=PASSWORD)
    page = client.get(f"/studies/{study.slug}/workers/").content.decode()
    assert "suspicious" in page
    fake = Worker.objects.get(external_id="FAKE0")
    log = client.get(f"/studies/{study.slug}/workers/{fake.pk}/entries/")
    assert log.status_code == 200 and b"Entered" in log.content and b"SESS1" in log.content
    # Another study's researcher cannot read it.
    client.logout()
    assert client.login(username="ada-admin", password=PASSWORD)
    assert (
        client.get(f"/studies/{cast.other_study.slug}/workers/{fake.pk}/entries/").status_code
        == 404
    )


def test_implausibly_fast_items_flag_a_worker_suspicious(cast: Cast, study: Study) -> None:
    from annotation.services.assignments import assignment_claim_next
    from tests.annotation.work_helpers import submit

    for _ in range(3):
        assignment = assignment_claim_next(worker=cast.worker_one)
        assert assignment is not None
        submit(assignment, likert_shown=2)
    HumanJudgment.objects.filter(worker=cast.worker_one).update(duration_ms=800)
    flags = {row.worker.pk: row.flags for row in study_worker_quality(study=study)}
    assert "suspicious" in flags[cast.worker_one.pk] and "fast" in flags[cast.worker_one.pk]


def test_one_action_excludes_a_participant_from_analysis_and_pay(
    client: Client, cast: Cast, study: Study
) -> None:
    from annotation.services.assignments import assignment_claim_next
    from tests.annotation.work_helpers import submit

    for _ in range(2):
        assignment = assignment_claim_next(worker=cast.worker_one)
        assert assignment is not None
        submit(assignment, likert_shown=2)
    held = assignment_claim_next(worker=cast.worker_one)
    assert held is not None
    assert client.login(username="rhea-researcher", password=PASSWORD)
    url = f"/studies/{study.slug}/workers/{cast.worker_one.pk}/action/"
    client.post(url, {"action": "exclude", "reason": ""})
    assert not Worker.objects.get(pk=cast.worker_one.pk).excluded  # a reason is needed
    client.post(url, {"action": "exclude", "reason": "Fabricated participant"})
    worker = Worker.objects.get(pk=cast.worker_one.pk)
    assert worker.excluded and worker.state == Worker.State.BLOCKED
    assert set(HumanJudgment.objects.filter(worker=worker).values_list("excluded", flat=True)) == {
        True
    }
    assert set(PayEntry.objects.filter(worker=worker).values_list("status", flat=True)) == {
        "rejected"
    }
    held.refresh_from_db()
    assert held.status != "reserved"
    # Unblocking does not bring an excluded participant back.
    client.post(url, {"action": "unblock", "reason": "oops"})
    assert Worker.objects.get(pk=worker.pk).state == Worker.State.BLOCKED
    # The Prolific bonus file pays them nothing.
    body = client.get(f"/studies/{study.slug}/payouts.csv?format=prolific").content.decode()
    assert worker.external_id not in body


def test_the_analysis_reads_no_judgment_of_an_excluded_participant(
    cast: Cast, study: Study
) -> None:
    from annotation.services.assignments import assignment_claim_next
    from annotation.services.workers import worker_exclude
    from leaderboard.selectors.frames import VoteFilters, study_votes_get
    from tests.annotation.work_helpers import submit

    for worker in (cast.worker_one, cast.worker_two):
        assignment = assignment_claim_next(worker=worker)
        assert assignment is not None
        submit(assignment, likert_shown=2)
    before = study_votes_get(study=study, filters=VoteFilters(raters="all"))
    assert len(before.human) == 2
    worker_exclude(worker=cast.worker_one, reason="Fabricated participant")
    after = study_votes_get(study=study, filters=VoteFilters(raters="all"))
    assert len(after.human) == 1
    assert list(after.human["rater"].astype(str)) == [f"w{cast.worker_two.pk}"]
