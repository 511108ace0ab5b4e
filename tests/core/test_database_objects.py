"""The functions and triggers are source: every one the migrated database holds has its file in
its app's `sql/` folder, with the same definition, and the migrations copy every file's current
text (core/db/objects.py, docs/database-objects.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations import RunSQL

from core.db.objects import (
    DatabaseObject,
    all_objects,
    app_objects,
    database_definitions,
    definitions_differing,
    migration_copies,
    migration_source,
    normalise,
    objects_without_file,
    pending_changes,
    read_object,
)

pytestmark = pytest.mark.django_db

APPS_WITH_SQL = ("annotation", "judges")


def _run(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _operations(source: str) -> list[RunSQL]:
    namespace: dict[str, object] = {}
    exec(compile(source, "<sqlmigration>", "exec"), namespace)
    return list(namespace["Migration"].operations)  # type: ignore[attr-defined]


def _apply(operation: RunSQL, *, backwards: bool = False) -> None:
    sql = operation.reverse_sql if backwards else operation.sql
    if sql != RunSQL.noop:
        _run(list(sql))  # type: ignore[arg-type]


def test_every_function_and_trigger_in_the_database_is_its_file() -> None:
    objects = all_objects()
    assert {obj.app_label for obj in objects} == set(APPS_WITH_SQL)
    assert definitions_differing(connection, objects) == []


def test_the_database_holds_no_function_or_trigger_without_a_file() -> None:
    assert objects_without_file(connection, all_objects()) == []
    # The claim, its reservation, its propensity and its closing of full pairs (active
    # selection), the two deletion counters and their five triggers, and a pair call's turn
    # from its pair with its trigger.
    assert len(database_definitions(connection)) == 13


def test_a_definition_changed_in_the_database_is_named_with_its_file() -> None:
    objects = all_objects()
    claim = next(obj for obj in objects if obj.name == "annotation_claim_pass")
    changed = claim.definition.replace("o_outcome := 'busy';", "o_outcome := 'busy!';")
    assert changed != claim.definition
    _run([changed])
    _run(["DROP TRIGGER annotation_answer_deletions ON annotation_answer"])
    problems = definitions_differing(connection, objects)
    assert len(problems) == 2
    assert problems[0].startswith(
        "trigger annotation_answer_deletions (" + str(apps.get_app_config("annotation").path)
    )
    assert problems[0].endswith("annotation_answer_deletions.sql) is not in the database")
    assert problems[1].startswith("function annotation_claim_pass differs from ")
    assert "-        o_outcome := 'busy';" in problems[1]
    assert "+        o_outcome := 'busy!';" in problems[1]


def test_a_function_or_trigger_without_a_file_is_named() -> None:
    _run(
        [
            "CREATE FUNCTION stray_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RETURN NULL; END $$",
            "CREATE TRIGGER stray_deletions AFTER DELETE ON annotation_system "
            "FOR EACH STATEMENT EXECUTE FUNCTION stray_count()",
        ]
    )
    assert objects_without_file(connection, all_objects()) == [
        "function stray_count",
        "trigger stray_deletions",
    ]


def test_the_comparison_reads_past_layout_but_not_past_the_body() -> None:
    text = (
        "CREATE OR REPLACE FUNCTION f(\n    a integer,\n    b text\n)\n RETURNS integer\n"
        " LANGUAGE plpgsql\nAS $function$\nBEGIN\n    RETURN a;  \nEND\n$function$\n"
    )
    database = (
        "CREATE OR REPLACE FUNCTION public.f(a integer, b text)\n RETURNS integer\n"
        " LANGUAGE plpgsql\nAS $$\nBEGIN\n    RETURN a;\nEND\n$$;"
    )
    assert normalise("function", text) == normalise("function", database)
    for edit in (("    RETURN", "  RETURN"), ("b text", "b int")):
        assert normalise("function", text) != normalise("function", text.replace(*edit))
    assert normalise("trigger", "CREATE TRIGGER t AFTER DELETE ON public.x\n    FOR EACH ROW") == (
        "CREATE TRIGGER t AFTER DELETE ON x FOR EACH ROW"
    )


@pytest.mark.parametrize("app_label", APPS_WITH_SQL)
def test_the_migrations_hold_every_files_current_text(app_label: str) -> None:
    assert pending_changes(app_objects(app_label), migration_copies(app_label)) == []
    call_command("sqlmigration", app_label, "--check")


def test_a_file_whose_name_is_not_its_objects_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other_name.sql"
    path.write_text("-- notes\nCREATE OR REPLACE FUNCTION f()\n RETURNS integer\n")
    with pytest.raises(Exception, match="defines function f, not other_name"):
        read_object("annotation", path)


def test_a_changed_file_becomes_a_migration_that_copies_it_and_undoes_to_the_last_copy() -> None:
    objects = app_objects("annotation")
    claim = next(obj for obj in objects if obj.name == "annotation_claim_pass")
    edited = replace(
        claim,
        definition=claim.definition.replace(
            "    -- Nothing open: the worker is done.\n",
            "    -- Nothing open: the worker is done (edited).\n",
        ),
    )
    assert edited.definition != claim.definition
    changed = [edited if obj is claim else obj for obj in objects]
    changes = pending_changes(changed, migration_copies("annotation"))
    assert [change.name for change in changes] == ["annotation_claim_pass"]
    source = migration_source(
        app_label="annotation", dependencies=[("annotation", "0001_initial")], changes=changes
    )
    [operation] = _operations(source)
    assert operation.hints == {"database_object": "annotation_claim_pass"}
    _apply(operation)
    assert definitions_differing(connection, changed) == []
    assert len(definitions_differing(connection, objects)) == 1
    _apply(operation, backwards=True)
    assert definitions_differing(connection, objects) == []


def test_new_changed_and_removed_objects_of_every_kind_migrate_both_ways() -> None:
    def function(name: str, arguments: str, body: str) -> DatabaseObject:
        definition = (
            f"CREATE OR REPLACE FUNCTION {name}({arguments})\n RETURNS trigger\n"
            f" LANGUAGE plpgsql\nAS $function$\nBEGIN\n    {body}\nEND\n$function$"
        )
        return DatabaseObject("annotation", "function", name, Path(f"{name}.sql"), definition)

    def trigger(name: str, event: str) -> DatabaseObject:
        definition = (
            f"CREATE TRIGGER {name} AFTER {event} ON annotation_system\n"
            "    FOR EACH STATEMENT EXECUTE FUNCTION probe_count()"
        )
        return DatabaseObject(
            "annotation", "trigger", name, Path(f"{name}.sql"), definition, "annotation_system"
        )

    def migrate(objects: list[DatabaseObject], copies: dict[str, str | None]) -> list[RunSQL]:
        changes = pending_changes(objects, copies)
        operations = _operations(
            migration_source(app_label="annotation", dependencies=[], changes=changes)
        )
        for operation in operations:
            _apply(operation)
        return operations

    def probes() -> dict[tuple[str, str], str]:
        return {k: v for k, v in database_definitions(connection).items() if "probe" in k[1]}

    first = [function("probe_count", "", "RETURN NULL;"), trigger("probe_deletions", "DELETE")]
    created = migrate(first, {})
    assert definitions_differing(connection, first) == []
    copies: dict[str, str | None] = {obj.name: obj.definition for obj in first}

    # The function's body and the trigger's event change.
    second = [function("probe_count", "", "RETURN OLD;"), trigger("probe_deletions", "UPDATE")]
    changed = migrate(second, copies)
    assert definitions_differing(connection, second) == []
    assert sorted(name for _, name in probes()) == ["probe_count", "probe_deletions"]

    # Undone, each is its first text again.
    for operation in reversed(changed):
        _apply(operation, backwards=True)
    assert definitions_differing(connection, first) == []

    # A file removed drops its object; undone, it comes back.
    dropped = migrate([first[0]], copies)
    assert [name for _, name in probes()] == ["probe_count"]
    for operation in reversed(dropped):
        _apply(operation, backwards=True)
    assert definitions_differing(connection, first) == []

    # Undoing the first migration drops both.
    for operation in reversed(created):
        _apply(operation, backwards=True)
    assert probes() == {}


def test_a_function_whose_arguments_change_is_dropped_before_it_is_made_again() -> None:
    def sum_function(arguments: str, body: str) -> DatabaseObject:
        definition = (
            f"CREATE OR REPLACE FUNCTION probe_sum({arguments})\n RETURNS integer\n"
            f" LANGUAGE plpgsql\nAS $function$\nBEGIN\n    RETURN {body};\nEND\n$function$"
        )
        return DatabaseObject("annotation", "function", "probe_sum", Path("p.sql"), definition)

    old, new = sum_function("a integer", "a"), sum_function("a integer, b integer", "a + b")
    _run([old.definition])
    [change] = pending_changes([new], {"probe_sum": old.definition})
    [operation] = _operations(migration_source(app_label="a", dependencies=[], changes=[change]))
    _apply(operation)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_proc WHERE proname = 'probe_sum'")
        assert cursor.fetchone() == (1,)
        cursor.execute("SELECT probe_sum(2, 3)")
        assert cursor.fetchone() == (5,)
    _apply(operation, backwards=True)
    assert definitions_differing(connection, [old]) == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_proc WHERE proname = 'probe_sum'")
        assert cursor.fetchone() == (1,)
