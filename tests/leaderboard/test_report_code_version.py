"""The report's code version: a change to the code its numbers depend on gives snapshots a new
key, a change elsewhere does not."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import LazySettings

from leaderboard.services.reports import code_version


def test_editing_the_shared_ranking_measures_changes_the_code_version_and_a_view_does_not(
    settings: LazySettings, tmp_path: Path
) -> None:
    for package in ("leaderboard", "rankeval"):
        shutil.copytree(Path(settings.BASE_DIR) / package, tmp_path / package)
    shutil.copy(Path(settings.BASE_DIR) / "pyproject.toml", tmp_path)  # the software version
    (tmp_path / "judges").mkdir()
    shutil.copy(Path(settings.BASE_DIR) / "judges" / "kinds.py", tmp_path / "judges")
    settings.BASE_DIR = tmp_path
    version = code_version.__wrapped__
    before = version()
    with (tmp_path / "leaderboard" / "views.py").open("a") as views:
        views.write("\n# a page changed\n")
    assert version() == before
    with (tmp_path / "rankeval" / "ndcg.py").open("a") as ndcg:
        ndcg.write("\n# NDCG changed\n")
    assert version() != before
    # The judge-kind registry says which judges are order-invariant, which the report reads.
    after_ndcg = version()
    with (tmp_path / "judges" / "kinds.py").open("a") as kinds:
        kinds.write("\n# a kind changed\n")
    assert version() != after_ndcg
