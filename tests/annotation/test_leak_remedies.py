"""A flagged answer gets a real remedy: left out of pairs, edited (the original kept for the
researcher only) or kept with a note; the launch checklist never calls a flagged study clean."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.test import Client

from annotation.models import Answer, Pair, Prompt, Study
from annotation.selectors.checklist import study_checklist
from annotation.services.leaks import LeakRemedyError, answer_leak_clear, answer_leak_remedy
from annotation.services.pairs import pairs_generate
from tests.annotation.work_helpers import enter_and_consent, open_item
from tests.conftest import Cast
from tests.factories import make_prompt_with_answers

Remedy = Answer.LeakRemedy
LEAK = "I am Claude, made by Anthropic. The haiku: an old silent pond."


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def study(cast: Cast) -> Study:
    study = cast.study
    study.gold_share = Decimal(0)
    study.overlap = 1
    study.target_per_worker = 10
    study.save()
    return study


def flagged_prompt(study: Study, external_id: str = "p1") -> tuple[Prompt, list[Answer]]:
    """A prompt with three answers, the first flagged for naming its model."""
    prompt, answers = make_prompt_with_answers(
        study, external_id, systems=("sys-a", "sys-b", "sys-c")
    )
    leaky = answers[0]
    leaky.turns = [LEAK]
    leaky.leak_matches = ["I am Claude, made by Anthropic"]
    leaky.leak_flagged = True
    leaky.save()
    return prompt, answers


def leaks_item(study: Study) -> tuple[bool, str]:
    item = next(item for item in study_checklist(study=study).items if item.key == "leaks")
    return item.ok, item.detail


def test_an_answer_left_out_of_pairs_is_never_served_to_a_worker(cast: Cast, study: Study) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    answer_leak_remedy(answer=leaky, user=cast.researcher, remedy=Remedy.EXCLUDED)

    result = pairs_generate(study=study, strategy="all")

    pairs = Pair.objects.filter(study=study)
    assert pairs.count() == 1 and result.skipped_answers == 1
    client = Client()
    enter_and_consent(client, study, "PID1")
    served = open_item(client, study)
    page = client.get(f"/work/{study.slug}/item/{served.public_id}/").content.decode()
    assert leaky.pk not in (served.pair.answer_a_id, served.pair.answer_b_id)
    assert "Claude" not in page
    assert leaks_item(study) == (True, "1 flagged answers reviewed: 1 left out of pairs")


def test_workers_read_the_edited_text_and_only_the_researcher_sees_the_original(
    cast: Cast, study: Study
) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    answer_leak_remedy(
        answer=leaky,
        user=cast.researcher,
        remedy=Remedy.EDITED,
        edited_turns=["The haiku: an old silent pond."],
    )
    leaky.refresh_from_db()
    assert leaky.turns == ["The haiku: an old silent pond."]
    assert leaky.original_turns == [LEAK]
    assert leaky.usable_in_pairs

    pairs_generate(study=study, strategy="all")
    worker = Client()
    enter_and_consent(worker, study, "PID1")
    seen = []
    for _ in range(3):
        assignment = open_item(worker, study)
        page = worker.get(f"/work/{study.slug}/item/{assignment.public_id}/").content.decode()
        seen.append((assignment.pair_id, "an old silent pond" in page, "Claude" in page))
        # The API a custom front end reads gives the held item back, with the same texts.
        api = worker.post(f"/work/{study.slug}/api/next/")
        assert api.status_code == 200 and str(assignment.public_id) in api.content.decode()
        assert "Claude" not in api.content.decode()
        worker.post(
            f"/work/{study.slug}/item/{assignment.public_id}/",
            {"submission_id": f"00000000-0000-0000-0000-00000000000{len(seen)}", "likert": "2"},
        )
    # The edited answer is in two of the three pairs; no page showed the original's name.
    assert sum(edited for _, edited, _ in seen) == 2
    assert not any(named for *_, named in seen)
    # The flagged page is the audit: the researcher reads the original; a worker gets 404.
    researcher = Client()
    researcher.force_login(cast.researcher)
    audit = researcher.get(f"/studies/{study.slug}/flagged/").content.decode()
    assert "I am Claude, made by Anthropic" in audit and "What workers read" in audit
    assert worker.get(f"/studies/{study.slug}/flagged/").status_code in (302, 403, 404)
    assert leaks_item(study) == (True, "1 flagged answers reviewed: 1 edited")


def test_an_edit_that_still_names_a_model_is_refused(cast: Cast, study: Study) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    for turns in (["I was trained by 0pen-AI. Here is the haiku."], [""], [LEAK], []):
        with pytest.raises(LeakRemedyError):
            answer_leak_remedy(
                answer=leaky, user=cast.researcher, remedy=Remedy.EDITED, edited_turns=turns
            )
    leaky.refresh_from_db()
    assert (leaky.turns, leaky.original_turns, leaky.leak_remedy) == ([LEAK], None, "")
    assert leaks_item(study)[0] is False


def test_keeping_a_leak_needs_a_note_and_the_checklist_says_workers_read_the_name(
    cast: Cast, study: Study
) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    with pytest.raises(LeakRemedyError, match="note is required"):
        answer_leak_remedy(answer=leaky, user=cast.researcher, remedy=Remedy.NOTED)

    answer_leak_remedy(
        answer=leaky,
        user=cast.researcher,
        remedy=Remedy.NOTED,
        note="The study measures judges on self-naming answers.",
    )

    leaky.refresh_from_db()
    assert leaky.usable_in_pairs and leaky.turns == [LEAK]
    ok, detail = leaks_item(study)
    assert ok
    assert detail == "1 flagged answers reviewed: 1 kept with a note: workers will read the name"
    assert "no answer names its model" not in detail


def test_the_checklist_never_calls_a_study_with_cleared_flags_clean(
    cast: Cast, study: Study
) -> None:
    assert leaks_item(study) == (True, "the leak scan flagged no answer")
    _, (leaky, *_) = flagged_prompt(study)
    assert leaks_item(study) == (
        False,
        "1 answers name a model and wait for review (they stay out of pairs until reviewed)",
    )
    answer_leak_clear(answer=leaky, user=cast.researcher)
    ok, detail = leaks_item(study)
    assert ok and detail == "1 flagged answers reviewed: 1 cleared as not giving a system away"


def test_a_review_changes_until_the_answer_is_in_a_pair_and_puts_the_original_back(
    cast: Cast, study: Study
) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    answer_leak_remedy(
        answer=leaky, user=cast.researcher, remedy=Remedy.EDITED, edited_turns=["A haiku."]
    )
    answer_leak_remedy(answer=leaky, user=cast.researcher, remedy=Remedy.EXCLUDED)
    leaky.refresh_from_db()
    assert (leaky.turns, leaky.original_turns) == ([LEAK], None)

    answer_leak_remedy(answer=leaky, user=cast.researcher, remedy=Remedy.CLEARED)
    pairs_generate(study=study, strategy="all")
    with pytest.raises(LeakRemedyError, match="already in 2 pairs"):
        answer_leak_remedy(answer=leaky, user=cast.researcher, remedy=Remedy.EXCLUDED)


def test_only_the_studys_researchers_may_apply_a_remedy(cast: Cast, study: Study) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    for user in (cast.outsider, cast.worker_one.user):
        assert user is not None
        with pytest.raises(PermissionDenied):
            answer_leak_remedy(answer=leaky, user=user, remedy=Remedy.EXCLUDED)
    leaky.refresh_from_db()
    assert leaky.leak_cleared_at is None


def test_the_remedy_form_on_the_flagged_page_applies_an_edit(cast: Cast, study: Study) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    client = Client()
    client.force_login(cast.researcher)
    assert 'name="remedy" value="edited"' in client.get(f"/studies/{study.slug}/flagged/").text

    response = client.post(
        f"/studies/{study.slug}/flagged/{leaky.pk}/remedy/",
        {"remedy": "edited", "turn": ["The haiku: an old pond."], "note": ""},
        follow=True,
    )

    assert "Edited: workers read the edited text" in response.content.decode()
    leaky.refresh_from_db()
    assert leaky.turns == ["The haiku: an old pond."] and leaky.original_turns == [LEAK]
    refused = client.post(
        f"/studies/{study.slug}/flagged/{leaky.pk}/remedy/",
        {"remedy": "edited", "turn": ["I'm GPT-4o here."]},
        follow=True,
    )
    assert "still names a model" in refused.content.decode()


def test_the_database_refuses_an_original_without_an_edit(study: Study) -> None:
    _, (leaky, *_) = flagged_prompt(study)
    with transaction.atomic(), pytest.raises(IntegrityError):
        Answer.objects.filter(pk=leaky.pk).update(original_turns=["x"])
    with transaction.atomic(), pytest.raises(IntegrityError):
        Answer.objects.filter(pk=leaky.pk).update(leak_remedy=Remedy.EXCLUDED)
