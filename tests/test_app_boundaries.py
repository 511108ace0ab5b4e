"""An app writes only its own tables; a write to another app's rows goes through that app's
services; and dependencies point one way: leaderboard reads annotation and judges, judges reads
annotation, annotation knows neither, and `leaderboard.stats` knows nothing of Django (DESIGN.md,
"Apps and where things live"). Under the apps lie two floors: `core/`, tools that know no domain,
imports no app and no part of config; `config/` (settings, URLs, the Celery app, WSGI) imports
the apps only from its settings, URLs and Celery app, so nothing of config sits between two apps.
`leaderboard.stats` imports nothing of the project but itself, `core.conventions` and
`core.errors` (both import nothing). Checked
here by reading the source.

Every import counts, at the top of a module or inside a function.

The check parses every module of annotation/, judges/ and leaderboard/ (migrations aside) and
refuses:
- a write method (`create`, `bulk_create`, `get_or_create`, `update_or_create`, `update`,
  `bulk_update`, `delete`, `save`, and `add` / `remove` / `set` / `clear` of a related manager) on
  anything derived from another app's model: `Pair.objects.create(...)`,
  `HumanJudgment.objects.filter(...).delete()`, `study.save()` where `study` came from
  `Study.objects...` or is a parameter typed `Study`, `run.pairs.add(...)`, a loop variable over
  such a query;
- SQL text that inserts into, updates, deletes from, copies into or truncates another app's table.

Reads stay free: filters, `values_list`, `select_for_update()` (a lock, not a write) and the like.
"Derived from" is followed through names (`self.study` too), attributes, subscripts, calls on
them, comprehensions, loops and `list`/`sorted`/`tuple`; a value that passes through a function
of its own is not followed, so the check can miss a write (it is a guard, not a proof).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
APPS = ("annotation", "judges", "leaderboard")
# The other apps each app may import.
MAY_IMPORT = {
    "annotation": frozenset(),
    "judges": frozenset({"annotation"}),
    "leaderboard": frozenset({"annotation", "judges"}),
}
# What `leaderboard.stats` may not import: Django, or any app but itself; of core, only the
# pure conventions and the errors' base.
STATS = "leaderboard/stats/"
STATS_REFUSES = ("django", "rest_framework", "config", "core", "rankeval", *APPS)
STATS_MAY_IMPORT = ("leaderboard.stats", "core.conventions", "core.errors")
# The project's top-level packages that hold domain code: what core may never import.
PROJECT_APPS = ("annotation", "judges", "leaderboard", "rankeval")
CORE_REFUSES = (*PROJECT_APPS, "config")
# The modules of config that may import an app: what the settings name, the URLs, the Celery app.
CONFIG_MAY_IMPORT_APPS = ("config/settings/", "config/urls.py", "config/celery.py")
WRITES = frozenset(
    {
        "create",
        "bulk_create",
        "get_or_create",
        "update_or_create",
        "update",
        "bulk_update",
        "delete",
        "save",
        "add",
        "remove",
        "set",
        "clear",
    }
)
# Calls that hand back the same objects they are given (a list of rows is still rows).
PASS_THROUGH = frozenset({"list", "sorted", "tuple", "reversed", "iter", "next"})
SQL_WRITE = re.compile(
    r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY|TRUNCATE(?:\s+TABLE)?)\s+\"?(\w+?)_\w+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _foreign_models(tree: ast.Module, app: str) -> tuple[set[str], set[str]]:
    """Names bound to other apps' models, and names bound to other apps' models modules."""
    models: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            owner = node.module.split(".")[0]
            if owner in APPS and owner != app and node.module == f"{owner}.models":
                models.update(alias.asname or alias.name for alias in node.names)
            elif owner in APPS and owner != app and node.module == owner:
                modules.update(
                    alias.asname or alias.name for alias in node.names if alias.name == "models"
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                owner = alias.name.split(".")[0]
                if (
                    owner in APPS
                    and owner != app
                    and alias.name == f"{owner}.models"
                    and alias.asname
                ):
                    modules.add(alias.asname)
    return models, modules


class _Scope:
    """Which names in one top-level function (or the module body) hold another app's rows."""

    def __init__(self, models: set[str], modules: set[str]) -> None:
        self.models = models
        self.modules = modules
        self.names: set[str] = set()

    def tainted(self, node: ast.AST | None) -> bool:
        if node is None:
            return False
        if isinstance(node, ast.Name):
            return node.id in self.models or node.id in self.names
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in self.modules:
                return True
            return ast.unparse(node) in self.names or self.tainted(node.value)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in PASS_THROUGH:
                return any(self.tainted(arg) for arg in node.args)
            return self.tainted(node.func)
        if isinstance(node, ast.Subscript | ast.Starred | ast.Await):
            return self.tainted(node.value)
        if isinstance(node, ast.NamedExpr):
            return self.tainted(node.value)
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(self.tainted(elt) for elt in node.elts)
        if isinstance(node, ast.IfExp):
            return self.tainted(node.body) or self.tainted(node.orelse)
        if isinstance(node, ast.BoolOp):
            return any(self.tainted(value) for value in node.values)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self.tainted(node.elt)
        if isinstance(node, ast.DictComp):
            return self.tainted(node.value)
        if isinstance(node, ast.Dict):
            return any(self.tainted(value) for value in node.values)
        return False

    def mentions_model(self, annotation: ast.AST | None) -> bool:
        if annotation is None:
            return False
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval")
            except SyntaxError:
                return False
        return any(
            isinstance(n, ast.Name) and n.id in self.models for n in ast.walk(annotation)
        ) or any(
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in self.modules
            for n in ast.walk(annotation)
        )

    def _bind(self, target: ast.AST) -> bool:
        """Mark the names a target binds; say if any is new."""
        if isinstance(target, ast.Name):
            new = target.id not in self.names
            self.names.add(target.id)
            return new
        if isinstance(target, ast.Tuple | ast.List):
            return any([self._bind(elt) for elt in target.elts])
        if isinstance(target, ast.Starred):
            return self._bind(target.value)
        if isinstance(target, ast.Attribute):  # `self.study = ...` marks `self.study` alone
            dotted = ast.unparse(target)
            new = dotted not in self.names
            self.names.add(dotted)
            return new
        return False

    def learn(self, body: ast.AST) -> None:
        """Mark every name bound from another app's rows, until nothing more is learnt."""
        changed = True
        while changed:
            changed = False
            for node in ast.walk(body):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    arguments = node.args
                    for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                        if self.mentions_model(arg.annotation):
                            changed |= self._bind(ast.Name(id=arg.arg, ctx=ast.Store()))
                elif isinstance(node, ast.Assign) and self.tainted(node.value):
                    for target in node.targets:
                        changed |= self._bind(target)
                elif isinstance(node, ast.AnnAssign) and (
                    self.tainted(node.value) or self.mentions_model(node.annotation)
                ):
                    changed |= self._bind(node.target)
                elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                    if self.tainted(node.iter):
                        changed |= self._bind(node.target)
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    if self.tainted(node.context_expr):
                        changed |= self._bind(node.optional_vars)
                elif isinstance(node, ast.NamedExpr) and self.tainted(node.value):
                    changed |= self._bind(node.target)

    def writes(self, body: ast.AST) -> Iterator[tuple[int, str]]:
        for node in ast.walk(body):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITES
                and self.tainted(node.func.value)
            ):
                yield node.lineno, f"{ast.unparse(node.func)}(...)"


def violations_in(source: str, path: str, app: str) -> list[Violation]:
    """The writes to other apps' tables that `source`, a module of `app`, makes."""
    tree = ast.parse(source, filename=path)
    models, modules = _foreign_models(tree, app)
    found: list[Violation] = []
    scopes: list[ast.AST] = [
        node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    module_level = ast.Module(
        body=[n for n in tree.body if n not in scopes and n not in classes], type_ignores=[]
    )
    for body in [*scopes, *classes, module_level]:
        scope = _Scope(models, modules)
        scope.learn(body)
        found += [
            Violation(path, line, f"writes another app's rows: {w}")
            for line, w in scope.writes(body)
        ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for match in SQL_WRITE.finditer(node.value):
                if match.group(1).lower() in APPS and match.group(1).lower() != app:
                    found.append(Violation(path, node.lineno, f"SQL writes {match.group(0)!r}"))
    return sorted(found, key=lambda v: v.line)


def _imported_names(source: str, path: str) -> Iterator[tuple[int, str]]:
    """Each absolute import of `source` (line, dotted name), at the top or inside a function."""
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def imports_in(source: str, path: str, app: str) -> list[Violation]:
    """The imports of `source`, a module of `app`, that point against the dependency rule."""
    found: list[Violation] = []
    for line, name in _imported_names(source, path):
        owner = name.split(".")[0]
        if owner in APPS and owner != app and owner not in MAY_IMPORT[app]:
            found.append(Violation(path, line, f"{app} imports {name}"))
        elif (
            path.startswith(STATS)
            and owner in STATS_REFUSES
            and not any(name == m or name.startswith(f"{m}.") for m in STATS_MAY_IMPORT)
        ):
            found.append(Violation(path, line, f"leaderboard.stats imports {name}"))
    return found


def floor_imports_in(source: str, path: str) -> list[Violation]:
    """The imports of `source`, a module of core/ or config/, that point up at an app."""
    found: list[Violation] = []
    for line, name in _imported_names(source, path):
        owner = name.split(".")[0]
        if path.startswith("core/") and owner in CORE_REFUSES:
            found.append(Violation(path, line, f"core imports {name}"))
        elif (
            path.startswith("config/")
            and owner in PROJECT_APPS
            and not path.startswith(CONFIG_MAY_IMPORT_APPS)
        ):
            found.append(Violation(path, line, f"config imports {name}"))
    return found


def floor_modules() -> Iterator[str]:
    for floor in ("core", "config"):
        for path in sorted((REPO / floor).rglob("*.py")):
            yield path.relative_to(REPO).as_posix()


def app_modules() -> Iterator[tuple[str, str]]:
    for app in APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield app, path.relative_to(REPO).as_posix()


def test_no_app_writes_another_apps_tables_except_through_its_services() -> None:
    found = [
        v
        for app, path in app_modules()
        for v in violations_in((REPO / path).read_text(encoding="utf-8"), path, app)
    ]
    assert not found, (
        "Write through the owning app's service instead (annotation/services/, judges/services/):\n"
        + "\n".join(map(str, found))
    )


def test_dependencies_between_apps_point_one_way() -> None:
    found = [
        v
        for app, path in app_modules()
        for v in imports_in((REPO / path).read_text(encoding="utf-8"), path, app)
    ]
    assert not found, (
        "leaderboard reads annotation and judges, judges reads annotation, annotation knows "
        "neither, leaderboard.stats knows no Django; move the code to the app allowed to "
        "import both:\n" + "\n".join(map(str, found))
    )


def test_core_and_config_stand_under_the_apps() -> None:
    found = [v for path in floor_modules() for v in floor_imports_in(_read(path), path)]
    assert not found, (
        "core knows no domain and no config: move the code that needs an app into that app; "
        "config imports the apps only from settings, urls.py and celery.py:\n"
        + "\n".join(map(str, found))
    )


def _read(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def test_the_floor_check_reads_core_and_config() -> None:
    paths = list(floor_modules())
    assert {"core/broker.py", "core/db/prepared.py", "config/urls.py"} <= set(paths)


@pytest.mark.parametrize(
    ("path", "snippet", "caught"),
    [
        ("core/x.py", "from annotation.models import Study", True),
        ("core/db/x.py", "def f():\n    import judges", True),
        ("core/x.py", "from config.celery import app", True),
        ("core/x.py", "import rankeval.metrics", True),
        ("core/x.py", "from leaderboard.stats import likert", True),
        ("core/x.py", "from core.queues import Queue\nfrom django.db import models", False),
        ("config/auth.py", "from annotation.roles import Role", True),
        ("config/x.py", "import leaderboard.views", True),
        ("config/auth.py", "from core.auth import AccountBackend", False),
        ("config/urls.py", "from annotation.views.studies import HomeView", False),
        ("config/settings/base.py", "from annotation import roles", False),
        ("config/celery.py", "from judges import tasks", False),
    ],
)
def test_the_floor_check_catches_an_import_of_an_app(path: str, snippet: str, caught: bool) -> None:
    assert bool(floor_imports_in(snippet, path)) is caught, snippet


@pytest.mark.parametrize(
    ("app", "path", "snippet"),
    [
        ("leaderboard", "leaderboard/stats/x.py", "from core.db.prepared import PreparedSelect"),
        ("leaderboard", "leaderboard/stats/x.py", "import core"),
        ("leaderboard", "leaderboard/stats/x.py", "from rankeval import metrics"),
        ("judges", "judges/services/x.py", "from leaderboard.services.contrast import build"),
        ("judges", "judges/services/x.py", "def f():\n    from leaderboard import models"),
        ("judges", "judges/x.py", "import leaderboard.selectors.contrast"),
        ("annotation", "annotation/x.py", "from judges.models import Judge"),
        ("annotation", "annotation/x.py", "def f():\n    import leaderboard"),
        ("leaderboard", "leaderboard/stats/x.py", "from django.db import models"),
        ("leaderboard", "leaderboard/stats/x.py", "from annotation.models import Pair"),
        ("leaderboard", "leaderboard/stats/x.py", "from leaderboard.models import ReportSnapshot"),
    ],
)
def test_the_check_catches_an_import_against_the_dependencies(
    app: str, path: str, snippet: str
) -> None:
    assert imports_in(snippet, path, app), snippet


@pytest.mark.parametrize(
    ("app", "path", "snippet"),
    [
        ("judges", "judges/x.py", "from annotation.models import Pair\nfrom judges import models"),
        ("leaderboard", "leaderboard/x.py", "from judges.models import Judge\nimport annotation"),
        ("leaderboard", "leaderboard/x.py", "from django.db import models"),
        ("leaderboard", "leaderboard/stats/x.py", "from leaderboard.stats.likert import collapse"),
        ("leaderboard", "leaderboard/stats/x.py", "from . import likert\nimport numpy as np"),
        ("leaderboard", "leaderboard/stats/x.py", "from core.conventions import LIKERT"),
        ("leaderboard", "leaderboard/stats/x.py", "import core.conventions"),
        ("annotation", "annotation/x.py", "from .models import Pair\nfrom django.db import models"),
    ],
)
def test_the_check_lets_imports_along_the_dependencies_through(
    app: str, path: str, snippet: str
) -> None:
    assert imports_in(snippet, path, app) == [], snippet


def test_the_check_reads_the_modules_it_is_about() -> None:
    paths = [path for _app, path in app_modules()]
    assert "leaderboard/services/mtbench_import.py" in paths
    assert len(paths) > 100 and not any("/migrations/" in p for p in paths)


# What the check must catch, and what it must let through, in a module of leaderboard.
HEADER = (
    "from annotation.models import Pair, Prompt, Study\n"
    "from judges.models import JudgeRun\n"
    "from judges import models as judge_models\n"
    "import annotation.models as am\n"
    "from leaderboard.models import ReportSnapshot\n"
)
CAUGHT = [
    "def f():\n    Pair.objects.create(turn=1)",
    "def f():\n    Pair.objects.bulk_create([])",
    "def f(s):\n    Study.objects.select_for_update().get_or_create(slug=s)",
    "def f(s):\n    Pair.objects.filter(study=s).update(turn=2)",
    "def f():\n    Pair.objects.filter(turn=3).delete()",
    "def f():\n    study = Study.objects.get(pk=1)\n    study.save()",
    "def f():\n    study, created = Study.objects.get_or_create(slug='x')\n    study.save()",
    "def f(study: Study):\n    study.notes = ''\n    study.save(update_fields=['notes'])",
    "def f(study: 'Study | None'):\n    study.delete()",
    "def f():\n    for prompt in Prompt.objects.all():\n        prompt.save()",
    "def f():\n    rows = {p.pk: p for p in Prompt.objects.all()}\n    rows[1].save()",
    "def f():\n    rows = sorted(Prompt.objects.all(), key=id)\n    rows[0].delete()",
    "def f(run: JudgeRun):\n    run.pairs.add(1)",
    "class V:\n    def get(self):\n        self.study = Study.objects.get()\n"
    "        self.study.save()",
    "def f():\n    judge_models.JudgeCall.objects.create()",
    "def f():\n    am.Pair.objects.update(turn=1)",
    "def f():\n    def inner(p):\n        Prompt.objects.create(study=p)\n    inner(1)",
    "SQL = 'INSERT INTO annotation_humanjudgment (id) VALUES (1)'",
    "SQL = 'COPY judges_judgecall (id) FROM STDIN'",
    "SQL = 'UPDATE \"annotation_pair\" SET turn = 1'",
]
LET_THROUGH = [
    "def f():\n    return list(Pair.objects.filter(turn=1).values_list('pk', flat=True))",
    "def f(study: Study):\n    Study.objects.select_for_update().get(pk=study.pk)",
    "def f(study: Study):\n    ReportSnapshot.objects.create(study=study)",
    "def f(study: Study):\n    ReportSnapshot.objects.filter(study=study).update(error='')",
    "def f():\n    seen = set()\n    for p in Pair.objects.all():\n        seen.add(p.pk)",
    "def f(study: Study):\n    row = ReportSnapshot.objects.get(study=study)\n    row.save()",
    "class V:\n    def get(self):\n        self.study = Study.objects.get()\n"
    "        self.form.save()",
    "SQL = 'SELECT id FROM annotation_pair WHERE turn = 1'",
    "SQL = 'UPDATE leaderboard_reportsnapshot SET error = NULL'",
]


@pytest.mark.parametrize("snippet", CAUGHT)
def test_the_check_catches_a_write_to_another_apps_rows(snippet: str) -> None:
    assert violations_in(HEADER + snippet, "leaderboard/x.py", "leaderboard"), snippet


@pytest.mark.parametrize("snippet", LET_THROUGH)
def test_the_check_lets_reads_locks_and_own_writes_through(snippet: str) -> None:
    assert violations_in(HEADER + snippet, "leaderboard/x.py", "leaderboard") == [], snippet


def test_an_app_may_write_its_own_models() -> None:
    source = "from annotation.models import Pair\ndef f():\n    Pair.objects.create(turn=1)"
    assert violations_in(source, "annotation/services/x.py", "annotation") == []
