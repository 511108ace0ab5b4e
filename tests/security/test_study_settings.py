"""The study's entry settings are validated in the model and by the database."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from annotation.models import Study


def test_the_partial_code_must_differ_from_the_full_code(db: None) -> None:
    study = Study(slug="s", name="S", completion_code="FULL1", partial_completion_code="FULL1")
    with pytest.raises(ValidationError) as error:
        study.full_clean()
    assert "partial_completion_code" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        study.save()


def test_a_prolific_study_id_with_url_characters_is_refused(db: None) -> None:
    study = Study(slug="s", name="S", prolific_study_id="abc&STUDY_ID=x")
    with pytest.raises(ValidationError) as error:
        study.full_clean()
    assert "prolific_study_id" in error.value.message_dict


def test_a_partial_code_needs_a_full_code(db: None) -> None:
    study = Study(slug="s", name="S", partial_completion_code="PART1")
    with pytest.raises(ValidationError) as error:
        study.full_clean()
    assert "completion_code" in error.value.message_dict


def test_each_study_gets_its_own_entry_link_key(db: None) -> None:
    one = Study.objects.create(slug="one", name="One")
    two = Study.objects.create(slug="two", name="Two")
    assert one.entry_link_key and one.entry_link_key != two.entry_link_key


def test_a_valid_prolific_configuration_passes(db: None) -> None:
    study = Study(
        slug="s",
        name="S",
        prolific_study_id="64f1c2e3a4b5c6d7e8f90123",
        completion_code="C1FULL",
        partial_completion_code="C1PART",
        entry_link_required=True,
    )
    study.full_clean()
