"""docker/.env.example lists every variable the settings read (DESIGN.md, "Configuration"), so
that an operator finds each one in the file they copy."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ("config/settings/base.py", "config/settings/production.py")


def settings_variables() -> set[str]:
    """The names passed to `env(...)` or `env.<kind>(...)` in the settings modules."""
    names = set()
    for module in SETTINGS:
        for node in ast.walk(ast.parse((ROOT / module).read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            reads_env = (isinstance(func, ast.Name) and func.id == "env") or (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "env"
            )
            first = node.args[0]
            if reads_env and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


def test_the_env_example_lists_every_variable_the_settings_read() -> None:
    names = settings_variables()
    # The parse finds the variables everyone sets, so an empty or broken parse cannot pass.
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CONCORD_JUDGE_CALL_BATCH"} <= names
    text = (ROOT / "docker" / ".env.example").read_text()
    listed = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))
    assert sorted(names - listed) == []
