"""The security suite: every test under tests/security/ carries the `security` marker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.cache import cache

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.security)


@pytest.fixture(autouse=True)
def fresh_entry_limits() -> Iterator[None]:
    """Start and end each test with empty entry-limit windows (they live in the cache)."""
    cache.clear()
    yield
    cache.clear()
