"""docs/architecture.md names the test that enforces each of its rules; each must exist, so the
page cannot go on promising a check that was renamed or removed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def test_every_check_the_architecture_page_names_exists() -> None:
    named = NAMED.findall(DOC.read_text(encoding="utf-8"))
    assert len({name for _, name in named if name}) >= 8, named
    missing = []
    for path, name in named:
        source = ROOT / path
        if not source.is_file():
            missing.append(path)
            continue
        if name:
            tree = ast.parse(source.read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            if name not in defined:
                missing.append(f"{path}::{name}")
    assert not missing, f"docs/architecture.md names checks that do not exist: {missing}"


def test_the_page_names_every_top_level_package() -> None:
    text = DOC.read_text(encoding="utf-8")
    packages = sorted(
        p.name
        for p in ROOT.iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name not in {"tests", "benchmarks"}
    )
    assert [p for p in packages if f"`{p}/`" not in text] == []
