"""Fixtures for the leaderboard tests: small MT-Bench-shaped files written to a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from annotation.models import Study
from annotation.services.roles import study_member_add
from leaderboard.models import ReportSnapshot
from leaderboard.services.reports import report_snapshot_compute
from tests.conftest import Cast

QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Write a blog post.", "Rewrite it."]},
    {"question_id": 101, "category": "reasoning", "turns": ["Who is second?", "And now?"]},
]
HUMAN = [
    # model_b listed first in canonical (alphabetical) order, so the winner flips.
    {"question_id": 81, "turn": 1, "model_a": "gpt-4", "model_b": "alpaca-13b",
     "winner": "model_a", "judge": "expert_1"},
    {"question_id": 81, "turn": 1, "model_a": "alpaca-13b", "model_b": "gpt-4",
     "winner": "model_b", "judge": "author_1"},
    {"question_id": 81, "turn": 2, "model_a": "alpaca-13b", "model_b": "gpt-4",
     "winner": "tie", "judge": "expert_1"},
    {"question_id": 101, "turn": 1, "model_a": "alpaca-13b", "model_b": "claude-v1",
     "winner": "model_a", "judge": "expert_2"},
]  # fmt: skip
GPT4 = [
    {"question_id": 81, "turn": 1, "model_a": "alpaca-13b", "model_b": "gpt-4",
     "winner": "tie (inconsistent)", "judge": "gpt4_pair"},
    {"question_id": 81, "turn": 2, "model_a": "gpt-4", "model_b": "alpaca-13b",
     "winner": "model_b", "judge": "gpt4_pair"},
]  # fmt: skip


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "questions": write_jsonl(tmp_path / "q.jsonl", QUESTIONS),
        "human": write_jsonl(tmp_path / "human.jsonl", HUMAN),
        "gpt4": write_jsonl(tmp_path / "gpt4.jsonl", GPT4),
    }


def run_import(files: dict[str, Path], *turns: str) -> None:
    args = [f"--{name}={path}" for name, path in files.items()]
    args += [f"--turn={t}" for t in turns]
    call_command("import_mtbench", *args, "--study=mt-bench")


@pytest.fixture
def export_study(cast: Cast, files: dict[str, Path], settings: Any, tmp_path: Path) -> Study:
    """The small MT-Bench study, imported, with the researcher a member and files written under a
    temporary var folder (exports write there)."""
    settings.CONCORD_VAR_DIR = tmp_path / "var"
    run_import(files)
    study = Study.objects.get(slug="mt-bench")
    study_member_add(study=study, user=cast.researcher)
    return study


def analysis_worker_run() -> int:
    """Do what the analysis worker does for each queued report snapshot (the page queues the
    task after commit, which a test transaction never reaches); return how many it computed."""
    queued = ReportSnapshot.objects.filter(queued_at__isnull=False).values_list("pk", flat=True)
    return sum(report_snapshot_compute(snapshot_id=pk) == "computed" for pk in list(queued))


def get_computed(client: Client, path: str, **extra: Any) -> Any:
    """GET a report page or download; when its report is still to be computed (progress page,
    503, 202), run the analysis worker's job and GET it again."""
    response = client.get(path, **extra)
    waiting = response.status_code in (202, 503) or (
        response.status_code == 200 and b'id="report-progress"' in response.content
    )
    if waiting and analysis_worker_run():
        response = client.get(path, **extra)
    return response
