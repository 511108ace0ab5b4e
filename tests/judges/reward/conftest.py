"""Fixtures of the reward-model tests: a private embedding cache and artifacts folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import LazySettings


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session: encoding is the slow part, vectors are exact."""
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture
def reward_dirs(settings: LazySettings, tmp_path: Path, embedding_cache: Path) -> Path:
    """Point the cache at the session's folder and the artifacts at this test's own folder."""
    settings.CONCORD_REWARD_CACHE_DIR = embedding_cache
    settings.CONCORD_REWARD_ARTIFACTS_DIR = tmp_path / "models"
    return tmp_path / "models"
