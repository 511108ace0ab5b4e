"""A reference judge writes the missing reference answers, against the fake OpenAI server."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Prompt
from annotation.services.references import prompt_reference_set
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
