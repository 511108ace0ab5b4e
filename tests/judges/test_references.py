"""A reference judge writes the missing reference answers, against the fake OpenAI server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.models import Prompt
from annotation.services.references import prompt_reference_set
from core.errors import ApplicationError
from judges.models import ReferenceCall
from judges.ratelimit import rate_slot_try
from judges.services.calls import cost_compute
from judges.services.references import reference_source, references_write
from tests.judges.conftest import make_llm_judge
from tests.judges.fake_openai import Fault, load_reply

pytestmark = pytest.mark.django_db

REPLY_TEXT = load_reply("likert_first_better")["choices"][0]["message"]["content"].strip()


def prompt(study, ref, category, *, reference=None):
    return Prompt.objects.create(
        study=study,
        external_id=ref,
        category=category,
        turns=[f"Question (ref {ref}-A)?", "A second turn."],
        reference_turns=reference,
        reference_source="imported" if reference else "",
    )


@pytest.fixture
def study(cast):
    cast.study.reference_categories = ["math"]
    cast.study.save(update_fields=["reference_categories"])
    return cast.study


def test_each_prompt_of_a_reference_category_is_asked_once_and_frozen(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    first, second = prompt(study, "r1", "math"), prompt(study, "r2", "math")
    outside = prompt(study, "r3", "writing")

    result = references_write(study=study, judge=judge)

    assert fake.requests() == {"r1:ab": 1, "r2:ab": 1}
    assert sorted(result.written) == ["r1", "r2"] and not result.failed
    for item in (first, second):
        item.refresh_from_db()
        assert item.reference_turns == [REPLY_TEXT]
        assert item.reference_source == "judge:ref-writer (gpt-4-fake)" == reference_source(judge)
    outside.refresh_from_db()
    assert outside.reference_turns is None and outside.reference_source == ""

    again = references_write(study=study, judge=judge)
    assert sum(fake.requests().values()) == 2  # frozen: nothing asked a second time
    assert again.written == [] and again.failed == []


def test_the_request_asks_for_a_reference_to_the_first_turn(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    prompt(study, "r1", "math")
    seen: list[str] = []
    original = fake.key_from

    def key_from(text: str) -> str:
        seen.append(text)
        return original(text)

    fake.key_from = key_from

    references_write(study=study, judge=judge)

    assert len(seen) == 1
    assert "Question (ref r1-A)?" in seen[0] and "A second turn." not in seen[0]
    assert "reference answer" in seen[0] and "correct" in seen[0]


def test_an_imported_reference_is_kept_and_not_asked_for(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    imported = prompt(study, "r1", "math", reference=["Forty-two."])
    prompt(study, "r2", "math")

    result = references_write(study=study, judge=judge)

    assert fake.requests() == {"r2:ab": 1} and result.written == ["r2"]
    imported.refresh_from_db()
    assert imported.reference_turns == ["Forty-two."]
    assert imported.reference_source == "imported"
    # The service that sets references never overwrites one either.
    assert not prompt_reference_set(prompt_id=imported.pk, reference_turns=["x"], source="judge:y")
    imported.refresh_from_db()
    assert imported.reference_turns == ["Forty-two."]


def test_a_server_error_leaves_its_prompt_without_a_reference_and_is_reported(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    good, bad = prompt(study, "r1", "math"), prompt(study, "r2", "math")
    fake.inject(Fault("500", key="r2:ab"))

    result = references_write(study=study, judge=judge)

    assert result.written == ["r1"]
    assert [(failure.external_id, "500" in failure.reason) for failure in result.failed] == [
        ("r2", True)
    ]
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.reference_turns is None and good.reference_turns == [REPLY_TEXT]

    retry = references_write(study=study, judge=judge)  # asks the failed prompt alone again
    assert retry.written == ["r2"] and fake.requests() == {"r1:ab": 1, "r2:ab": 2}


def test_the_command_writes_the_named_categories_and_reports_failures(study, fake, api_key):
    make_llm_judge(fake, name="ref-writer")
    prompt(study, "r1", "math")
    coding = prompt(study, "r2", "coding")
    fake.inject(Fault("500", key="r1:ab"))

    with pytest.raises(CommandError, match="1 prompts got no reference"):
        call_command(
            "references_write", "--study", study.slug, "--judge", "ref-writer",
            "--categories", "math", "coding",
        )  # fmt: skip

    coding.refresh_from_db()
    assert coding.reference_source == "judge:ref-writer (gpt-4-fake)"
    with pytest.raises(CommandError, match="no judge named"):
        call_command("references_write", "--study", study.slug, "--judge", "nobody")


# The ledger: every request to a reference judge is on judges.models.ReferenceCall.


def test_each_prompt_has_one_ledger_row_with_the_request_as_sent_and_its_cost(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    first, second = prompt(study, "r1", "math"), prompt(study, "r2", "math")

    result = references_write(study=study, judge=judge)

    rows = list(ReferenceCall.objects.filter(study=study).order_by("prompt_id"))
    assert [(row.prompt_id, row.judge_id) for row in rows] == [
        (first.pk, judge.pk),
        (second.pk, judge.pk),
    ]
    for row, item in zip(rows, (first, second), strict=True):
        assert row.status == ReferenceCall.Status.DONE and row.stored and row.attempts == 1
        assert row.reply.strip() == REPLY_TEXT and row.error == ""
        assert row.request["model"] == "gpt-4-fake" and row.request["params"]["max_tokens"] == 2048
        assert item.turns[0] in row.request["messages"][-1]["content"]
        assert row.idempotency_key == f"concord-reference-{judge.pk}-{item.pk}"
        assert row.tokens_in > 0 and row.tokens_out == 31  # the recorded reply's usage
        assert row.cost_usd == cost_compute(
            judge=judge, tokens_in=row.tokens_in, tokens_out=row.tokens_out
        )
        assert row.finished_at is not None and row.lease_token
    assert result.cost_usd == sum(row.cost_usd for row in rows) > 0

    again = references_write(study=study, judge=judge)
    assert ReferenceCall.objects.filter(study=study).count() == 2 and again.cost_usd == 0


def test_a_failed_request_is_recorded_and_its_retry_pays_once(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    prompt(study, "r1", "math")
    bad = prompt(study, "r2", "math")
    fake.inject(Fault("500", key="r2:ab"))

    references_write(study=study, judge=judge)

    row = ReferenceCall.objects.get(prompt=bad)
    assert row.status == ReferenceCall.Status.FAILED and row.attempts == 1
    assert "attempt 1: HTTP 500" in row.error and row.cost_usd == 0 and not row.stored

    retry = references_write(study=study, judge=judge)
    row.refresh_from_db()
    assert retry.written == ["r2"] and row.status == ReferenceCall.Status.DONE
    assert row.attempts == 2 and row.error == "" and row.stored
    # One row per prompt, and each reply generated (so paid) once: the done prompt was not
    # asked again, the failed one once more, on the same row.
    assert ReferenceCall.objects.filter(study=study).count() == 2
    assert fake.generations() == {"r1:ab": 1, "r2:ab": 1}
    assert row.cost_usd == cost_compute(
        judge=judge, tokens_in=row.tokens_in, tokens_out=row.tokens_out
    )


def test_a_refused_reply_is_paid_recorded_and_asked_anew_with_a_new_key(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    item = prompt(study, "r1", "math")
    fake.inject(Fault("reply", key="r1:ab", reply="refusal_api"))

    result = references_write(study=study, judge=judge)

    row = ReferenceCall.objects.get(prompt=item)
    assert [f.external_id for f in result.failed] == ["r1"]
    assert row.status == ReferenceCall.Status.FAILED and row.cost_usd > 0  # a refusal is paid
    refused_cost = row.cost_usd
    item.refresh_from_db()
    assert item.reference_turns is None

    references_write(study=study, judge=judge)
    row.refresh_from_db()
    # Asked anew (a cached refusal would come back under the old key), and both replies paid.
    base = f"concord-reference-{judge.pk}-{item.pk}"
    assert [record.call for record in fake.snapshot()] == [base, f"{base}-1"]
    assert fake.generations() == {"r1:ab": 2}
    assert row.status == ReferenceCall.Status.DONE and row.cost_usd > refused_cost
    assert row.tokens_out == 11 + 31  # the refusal's and the answer's
    assert row.cost_usd == cost_compute(
        judge=judge, tokens_in=row.tokens_in, tokens_out=row.tokens_out
    )


def test_a_reply_on_the_ledger_is_stored_again_without_a_request(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    item = prompt(study, "r1", "math")
    references_write(study=study, judge=judge)
    # The reference gone (a restore from before it was set): the ledger still has the reply.
    Prompt.objects.filter(pk=item.pk).update(reference_turns=None, reference_source="")

    again = references_write(study=study, judge=judge)

    assert again.reused == ["r1"] and again.cost_usd == 0
    assert fake.requests() == {"r1:ab": 1}
    item.refresh_from_db()
    assert item.reference_turns == [REPLY_TEXT]


def test_a_row_another_writer_holds_is_not_asked_until_its_lease_runs_out(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer")
    item = prompt(study, "r1", "math")
    held = ReferenceCall.objects.create(
        study=study,
        prompt=item,
        judge=judge,
        idempotency_key=f"concord-reference-{judge.pk}-{item.pk}",
        status=ReferenceCall.Status.RUNNING,
        attempts=1,
        lease_token="x" * 32,
        lease_expires_at=timezone.now() + timedelta(minutes=3),
    )

    busy = references_write(study=study, judge=judge)
    assert [f.reason for f in busy.failed] == ["another writer is asking for it now"]
    assert sum(fake.requests().values()) == 0

    ReferenceCall.objects.filter(pk=held.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    taken = references_write(study=study, judge=judge)
    held.refresh_from_db()
    assert taken.written == ["r1"] and held.status == ReferenceCall.Status.DONE
    # The dead writer's request may have been paid: counted on the row.
    assert held.attempts == 2 and held.unrecorded_requests == 1


def test_a_judge_without_prices_writes_nothing(study, fake, api_key):
    judge = make_llm_judge(fake, name="ref-writer", price_in="0", price_out="0")
    prompt(study, "r1", "math")

    with pytest.raises(ApplicationError, match="has no prices"):
        references_write(study=study, judge=judge)
    assert sum(fake.requests().values()) == 0 and not ReferenceCall.objects.exists()


def test_the_requests_wait_for_the_judges_rate_limit(study, fake, api_key, settings):
    # One request a minute, and a writer patient for 1 s: the second prompt finds no slot.
    settings.CONCORD_JUDGE_LEASE_SECONDS = 1
    judge = make_llm_judge(fake, name="ref-writer", rpm=1)
    prompt(study, "r1", "math")
    prompt(study, "r2", "math")

    result = references_write(study=study, judge=judge)

    assert fake.requests() == {"r1:ab": 1} and result.written == ["r1"]
    assert [
        (f.external_id, f.reason.startswith("not asked: no rate-limit slot")) for f in result.failed
    ] == [("r2", True)]
    # The slot is the judge's own, the one its judge calls take.
    assert (
        rate_slot_try(
            key=f"judge:{judge.pk}", requests_per_window=1, tokens_per_window=None, tokens=1
        )
        > 0
    )
