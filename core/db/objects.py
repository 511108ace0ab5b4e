"""Database objects as source: each function and trigger's current text, one file per object.

An app keeps the PL/pgSQL functions and triggers it owns in its `sql/` folder, one file per
object named after it (`annotation/sql/annotation_claim_pass.sql`): a header of `--` comments
(what the object does, which locks it takes and why), then its definition, as PostgreSQL gives it
back (`pg_get_functiondef`, `pg_get_triggerdef(oid, true)`). A migration copies that text when it
changes (`manage.py sqlmigration APP` writes such a migration, see docs/database-objects.md): a
`RunSQL` whose hints name the object (`{"database_object": name}`) and whose last statement is the
copy. The migrations stay history; the files say what the database holds now, and
tests/core/test_database_objects.py checks both against a migrated database.

Definitions are compared normalised: a function's header (everything before its body's dollar
quote) with its whitespace collapsed and without the schema PostgreSQL writes before the name, its
body exactly but for trailing whitespace; a trigger with its whitespace collapsed.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.apps import apps
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations import RunSQL
from django.db.migrations.loader import MigrationLoader

from core.errors import ApplicationError

Kind = Literal["function", "trigger"]
HINT = "database_object"

_FUNCTION = re.compile(r"CREATE OR REPLACE FUNCTION (?:\w+\.)?(\w+)\s*\(", re.IGNORECASE)
_TRIGGER = re.compile(
    r"CREATE (?:OR REPLACE )?TRIGGER (\w+)\s.*?\sON\s+((?:\w+\.)?\w+)\s", re.IGNORECASE | re.DOTALL
)
_BODY_QUOTE = re.compile(r"\bAS\s+(\$\w*\$)")


class DatabaseObjectError(ApplicationError):
    """An object file that cannot be read as one function or one trigger named as the file."""


@dataclass(frozen=True)
class DatabaseObject:
    """One function or trigger: its app, kind, name, file and definition (the header removed)."""

    app_label: str
    kind: Kind
    name: str
    path: Path
    definition: str
    # The trigger's table (None for a function).
    table: str | None = None


def definition_of(text: str) -> str:
    """The definition in an object file's text: the text after its leading `--` comment lines and
    blank lines, without trailing whitespace."""
    lines = text.splitlines()
    start = 0
    while start < len(lines) and (not lines[start].strip() or lines[start].startswith("--")):
        start += 1
    return "\n".join(lines[start:]).rstrip()


def parse_definition(definition: str) -> tuple[Kind, str, str | None]:
    """(kind, name, table) of a definition; DatabaseObjectError when it is neither kind."""
    if match := _FUNCTION.match(definition):
        return "function", match.group(1), None
    if match := _TRIGGER.match(definition):
        return "trigger", match.group(1), match.group(2)
    raise DatabaseObjectError(
        "an object's definition starts with CREATE OR REPLACE FUNCTION name( or "
        f"CREATE TRIGGER name ... ON table: {definition[:60]!r}"
    )


def read_object(app_label: str, path: Path) -> DatabaseObject:
    """The object of one file; its name must be the file's name."""
    definition = definition_of(path.read_text())
    kind, name, table = parse_definition(definition)
    if name != path.stem:
        raise DatabaseObjectError(f"{path} defines {kind} {name}, not {path.stem}")
    return DatabaseObject(app_label, kind, name, path, definition, table)


def app_objects(app_label: str) -> list[DatabaseObject]:
    """The objects of one app's `sql/` folder, by name (none when it has no folder)."""
    folder = Path(apps.get_app_config(app_label).path) / "sql"
    return [read_object(app_label, path) for path in sorted(folder.glob("*.sql"))]


def all_objects() -> list[DatabaseObject]:
    """The objects of every installed app; DatabaseObjectError when two share a name."""
    objects: dict[str, DatabaseObject] = {}
    for config in apps.get_app_configs():
        for obj in app_objects(config.label):
            if obj.name in objects:
                raise DatabaseObjectError(
                    f"{obj.name} is defined in {objects[obj.name].path} and {obj.path}"
                )
            objects[obj.name] = obj
    return list(objects.values())


def normalise(kind: Kind, definition: str) -> str:
    """The definition in the form two definitions are compared in (see the module's notes)."""
    definition = definition.strip().removesuffix(";").rstrip()
    if kind == "trigger":
        definition = re.sub(r"\s+", " ", definition)
        # pg_get_triggerdef leaves out the schema of a table on the search path; so do the files.
        return re.sub(r"\sON \w+\.", " ON ", definition)
    quote = _BODY_QUOTE.search(definition)
    header, body = (definition, "") if quote is None else definition.split(quote.group(0), 1)
    header = re.sub(r"\s+", " ", header).strip()
    header = re.sub(r"\(\s", "(", re.sub(r"\s\)", ")", header))
    header = re.sub(r"^(CREATE OR REPLACE FUNCTION )\w+\.", r"\1", header, flags=re.IGNORECASE)
    body = "\n".join(line.rstrip() for line in body.splitlines()).strip("\n")
    # The body's own dollar quote is named in the comparison, so "$$" and "$function$" agree.
    return f"{header} AS $$\n{body.removesuffix(quote.group(1) if quote else '').rstrip()}\n$$"


def database_definitions(connection: BaseDatabaseWrapper) -> dict[tuple[Kind, str], str]:
    """Every function and trigger of the connection's current schema, as PostgreSQL writes them,
    by (kind, name): functions (aggregates and what extensions install left out) by
    pg_get_functiondef, triggers (the ones constraints make left out) by pg_get_triggerdef."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT p.proname, pg_get_functiondef(p.oid)
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = current_schema() AND p.prokind IN ('f', 'p')
              AND NOT EXISTS (SELECT 1 FROM pg_depend d
                              WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                AND d.deptype = 'e')
            """
        )
        definitions: dict[tuple[Kind, str], str] = {
            ("function", name): text for name, text in cursor.fetchall()
        }
        cursor.execute(
            """
            SELECT t.tgname, pg_get_triggerdef(t.oid, true)
            FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND NOT t.tgisinternal
            """
        )
        definitions.update({("trigger", name): text for name, text in cursor.fetchall()})
    return definitions


def definitions_differing(
    connection: BaseDatabaseWrapper, objects: Sequence[DatabaseObject]
) -> list[str]:
    """For each object whose database definition is missing or differs from its file, a line
    naming it and its file, with a diff of the normalised texts."""
    held = database_definitions(connection)
    problems = []
    for obj in objects:
        current = held.get((obj.kind, obj.name))
        if current is None:
            problems.append(f"{obj.kind} {obj.name} ({obj.path}) is not in the database")
            continue
        want, have = normalise(obj.kind, obj.definition), normalise(obj.kind, current)
        if want != have:
            diff = difflib.unified_diff(
                want.splitlines(), have.splitlines(), "file", "database", lineterm=""
            )
            problems.append(f"{obj.kind} {obj.name} differs from {obj.path}:\n" + "\n".join(diff))
    return problems


def objects_without_file(
    connection: BaseDatabaseWrapper, objects: Sequence[DatabaseObject]
) -> list[str]:
    """'kind name' of each function and trigger the database holds that no file defines."""
    files = {(obj.kind, obj.name) for obj in objects}
    return sorted(
        f"{kind} {name}"
        for kind, name in database_definitions(connection)
        if (kind, name) not in files
    )


# Writing migrations.


def _statements(sql: object) -> list[str]:
    if isinstance(sql, str):
        return [sql]
    return [item if isinstance(item, str) else item[0] for item in sql]  # type: ignore[attr-defined]


def migration_copies(app_label: str) -> dict[str, str | None]:
    """The last copy of each object that the app's migrations hold, by name (None: dropped).

    A copy is the last statement of a RunSQL whose hints name the object, in the order the
    migrations apply."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    copies: dict[str, str | None] = {}
    seen: set[tuple[str, str]] = set()
    for leaf in loader.graph.leaf_nodes(app_label):
        for key in loader.graph.forwards_plan(leaf):
            if key[0] != app_label or key in seen:
                continue
            seen.add(key)
            for operation in loader.graph.nodes[key].operations:
                name = getattr(operation, "hints", {}).get(HINT)
                if not isinstance(operation, RunSQL) or name is None:
                    continue
                last = _statements(operation.sql)[-1]
                copies[name] = None if last.lstrip().upper().startswith("DROP") else last
    return copies


@dataclass(frozen=True)
class Change:
    """One operation of a migration that brings an object in line with its file."""

    name: str
    sql: list[str]
    reverse_sql: list[str]


def _function_arguments(definition: str) -> str:
    """The parenthesised argument list of a function's definition (for DROP FUNCTION)."""
    start = definition.index("(")
    depth = 0
    for position in range(start, len(definition)):
        depth += {"(": 1, ")": -1}.get(definition[position], 0)
        if depth == 0:
            return re.sub(r"\s+", " ", definition[start : position + 1])
    raise DatabaseObjectError(f"unbalanced argument list: {definition[:60]!r}")


def _drop(kind: Kind, name: str, definition: str) -> str:
    if kind == "trigger":
        _, _, table = parse_definition(definition)
        return f"DROP TRIGGER IF EXISTS {name} ON {table}"
    return f"DROP FUNCTION IF EXISTS {name}{_function_arguments(definition)}"


def _create(kind: Kind, name: str, definition: str) -> list[str]:
    # CREATE TRIGGER cannot replace: the trigger is dropped first, in the same transaction.
    return [_drop(kind, name, definition), definition] if kind == "trigger" else [definition]


def _replace(kind: Kind, name: str, old: str, new: str) -> list[str]:
    if (
        kind == "function"
        and normalise(kind, old).split(" AS $$")[0] != normalise(kind, new).split(" AS $$")[0]
    ):
        # CREATE OR REPLACE keeps the old one when the arguments change and refuses a new
        # return type: drop it first.
        return [_drop(kind, name, old), new]
    return _create(kind, name, new)


def pending_changes(
    objects: Sequence[DatabaseObject], copies: dict[str, str | None], *, adopt: bool = False
) -> list[Change]:
    """The operations that bring the migrations' copies in line with the files, in file order
    (functions before triggers, which may call them), then drops of objects whose file is gone.

    adopt: the objects without a copy already exist, made by hand-written migrations, so undoing
    the migration leaves them as they are instead of dropping them."""
    changes = []
    for obj in sorted(objects, key=lambda o: (o.kind != "function", o.name)):
        copy = copies.get(obj.name)
        if copy is not None and normalise(obj.kind, copy) == normalise(obj.kind, obj.definition):
            continue
        if copy is None:
            reverse = [] if adopt else [_drop(obj.kind, obj.name, obj.definition)]
            changes.append(Change(obj.name, _create(obj.kind, obj.name, obj.definition), reverse))
        else:
            changes.append(
                Change(
                    obj.name,
                    _replace(obj.kind, obj.name, copy, obj.definition),
                    _replace(obj.kind, obj.name, obj.definition, copy),
                )
            )
    names = {obj.name for obj in objects}
    for name, copy in copies.items():
        if copy is not None and name not in names:
            kind, _, _ = parse_definition(copy)
            changes.append(Change(name, [_drop(kind, name, copy)], _create(kind, name, copy)))
    return changes


def _literal(text: str) -> str:
    """A Python literal of the text, triple-quoted when that reads back exactly."""
    if "\n" not in text and '"' not in text and "\\" not in text:
        return f'"{text}"'
    if '"""' not in text and "\\" not in text and not text.endswith('"'):
        return f'"""{text}"""'
    return repr(text)


def migration_source(
    *, app_label: str, dependencies: Iterable[tuple[str, str]], changes: Sequence[Change]
) -> str:
    """The text of a migration module that runs the changes, each a RunSQL naming its object."""
    names = textwrap.wrap(
        f"{app_label}/sql/: " + ", ".join(change.name for change in changes) + ".", width=96
    )
    lines = [
        f'"""Copy what changed in {app_label}/sql/ (functions and triggers).',
        "",
        *names,
        "",
        "Written by `manage.py sqlmigration`: each RunSQL's last statement is the object's",
        "definition as its file held it (see docs/database-objects.md).",
        '"""',
        "",
        "from django.db import migrations",
        "",
    ]
    for number, change in enumerate(changes):
        for label, statements in (("SQL", change.sql), ("REVERSE", change.reverse_sql)):
            for index, statement in enumerate(statements):
                lines += [f"{label}_{number}_{index} = {_literal(statement)}", ""]
    lines += ["", "class Migration(migrations.Migration):", "    dependencies = ["]
    lines += [f'        ("{app}", "{name}"),' for app, name in dependencies]
    lines += ["    ]", "", "    operations = ["]
    for number, change in enumerate(changes):
        sql = ", ".join(f"SQL_{number}_{index}" for index in range(len(change.sql)))
        reverse = ", ".join(f"REVERSE_{number}_{index}" for index in range(len(change.reverse_sql)))
        lines += [
            "        migrations.RunSQL(",
            f"            [{sql}],",
            f"            [{reverse}]," if reverse else "            migrations.RunSQL.noop,",
            f'            hints={{"{HINT}": "{change.name}"}},',
            "        ),",
        ]
    lines += ["    ]", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class SqlMigration:
    """A migration that `sql_migration_make` wrote (or would write): its file and text."""

    path: Path
    source: str
    changes: list[Change]


def sql_migration_make(
    *, app_label: str, name: str | None = None, adopt: bool = False, write: bool = True
) -> SqlMigration | None:
    """Write the migration that copies the app's changed object files after its latest one;
    None when every file equals its last copy. write=False only says what it would write."""
    changes = pending_changes(app_objects(app_label), migration_copies(app_label), adopt=adopt)
    if not changes:
        return None
    loader = MigrationLoader(None, ignore_no_migrations=True)
    leaves = loader.graph.leaf_nodes(app_label)
    if len(leaves) != 1:
        raise DatabaseObjectError(
            f"{app_label} has {len(leaves)} latest migrations; merge them first (makemigrations "
            "--merge)"
        )
    latest = leaves[0][1]
    number = int(latest.split("_", 1)[0]) + 1 if latest[:4].isdigit() else 1
    name = name or "sql_" + "_".join(change.name for change in changes[:2])
    folder = Path(apps.get_app_config(app_label).path) / "migrations"
    path = folder / f"{number:04d}_{name[:60]}.py"
    source = migration_source(
        app_label=app_label, dependencies=[(app_label, latest)], changes=changes
    )
    if write:
        path.write_text(source)
    return SqlMigration(path, source, changes)
