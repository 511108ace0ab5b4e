"""Migration judges.0006 copies finished trainings' held-out prompts from their artifacts."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from django.apps import apps

from judges.models import Judge, PLTraining
from tests.conftest import Cast

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("judges.migrations.0006_pltraining_held_out_prompts")


def _done(cast: Cast, name: str, artifact: str) -> PLTraining:
    judge = Judge.objects.create(name=name, kind=Judge.Kind.PL)
    return PLTraining.objects.create(
        study=cast.study, name=name, status="done", judge=judge, artifact=artifact
    )


def test_a_training_gets_its_artifacts_held_out_prompts_and_one_without_its_folder_stays_null(
    cast: Cast, reward_dirs: Path
) -> None:
    (reward_dirs / "pl-1").mkdir(parents=True)
    (reward_dirs / "pl-1" / "metadata.json").write_text(json.dumps({"held_out_prompts": [7, 3]}))
    found, missing = _done(cast, "with folder", "pl-1"), _done(cast, "without", "pl-2")
    MIGRATION.held_out_from_artifacts(apps, None)
    found.refresh_from_db()
    missing.refresh_from_db()
    assert (found.held_out_prompts, missing.held_out_prompts) == ([7, 3], None)
