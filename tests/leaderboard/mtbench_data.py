"""Where the published MT-Bench labels live for tests, and how to load them into a study."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management import call_command

REPO_ROOT = Path(__file__).resolve().parents[2]
FILES = ("mt_bench_question.jsonl", "human.jsonl", "gpt4_pair.jsonl")


def mtbench_dir() -> Path:
    """The shared data folder: ../shared/data/mt_bench_human_judgments next to the repository,
    or $CONCORD_SHARED_DATA/mt_bench_human_judgments. Missing data fails the test, never skips."""
    candidates = [REPO_ROOT.parent / "shared" / "data" / "mt_bench_human_judgments"]
    if os.environ.get("CONCORD_SHARED_DATA"):
        candidates.insert(0, Path(os.environ["CONCORD_SHARED_DATA"]) / "mt_bench_human_judgments")
    for folder in candidates:
        if all((folder / name).is_file() for name in FILES):
            return folder
    raise AssertionError(
        "The MT-Bench labels are missing: expected "
        + " or ".join(str(c) for c in candidates)
        + f" to hold {', '.join(FILES)}. Set CONCORD_SHARED_DATA to the shared data folder."
    )


def mtbench_load(slug: str, *turns: int) -> None:
    """Import the published labels into the study `slug` with the real command."""
    folder = mtbench_dir()
    call_command(
        "import_mtbench",
        f"--questions={folder / 'mt_bench_question.jsonl'}",
        f"--human={folder / 'human.jsonl'}",
        f"--gpt4={folder / 'gpt4_pair.jsonl'}",
        *[f"--turn={t}" for t in turns],
        f"--study={slug}",
    )
