"""The pre-commit hooks run what CI runs: the commands of the Makefile's `lint` and `typecheck`
targets (which `make test` runs), each on the whole tree, from the project's .venv, with no hook
fetched from the network (pre-commit is run where there may be no internet)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def makefile_commands(*targets: str) -> list[str]:
    """The recipe lines of the Makefile's `targets`, in order, with $(BIN) written out."""
    text = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+) :?= (.*)$", text, flags=re.MULTILINE))
    commands = []
    for target in targets:
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, flags=re.MULTILINE)
        assert recipe, f"the Makefile has no `{target}` target"
        for line in recipe.group(1).splitlines():
            command = line.strip()
            # $(BIN) is $(VENV)/bin: written out, innermost first.
            while "$(" in command:
                command = re.sub(r"\$\((\w+)\)", lambda m: variables[m.group(1)], command)
            commands.append(command)
    return commands


def hooks() -> list[dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    return [hook | {"repo": repo["repo"]} for repo in config["repos"] for hook in repo["hooks"]]


def test_the_hooks_run_the_commands_of_make_lint_and_typecheck_in_their_order() -> None:
    assert [hook["entry"] for hook in hooks()] == makefile_commands("lint", "typecheck")
    assert makefile_commands("lint", "typecheck") == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/mypy .",
    ]


def test_every_hook_is_local_and_runs_on_the_whole_tree_on_every_commit() -> None:
    for hook in hooks():
        assert hook["repo"] == "local", hook["id"]
        assert hook["language"] == "system", hook["id"]
        # Given file names, ruff and mypy would check only the staged files, not what CI checks.
        assert hook["pass_filenames"] is False, hook["id"]
        assert hook["always_run"] is True, hook["id"]
