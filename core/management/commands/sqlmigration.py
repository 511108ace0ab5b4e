"""Write a migration that copies an app's changed `sql/` files: `manage.py sqlmigration APP`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.db.objects import DatabaseObjectError, sql_migration_make


class Command(BaseCommand):
    help = (
        "Write a migration (RunSQL) that copies each function or trigger file of APP/sql/ whose "
        "text differs from the last migration's copy (see docs/database-objects.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("app_label")
        parser.add_argument("--name", help="the migration's name after its number")
        parser.add_argument(
            "--check",
            action="store_true",
            help="write nothing; exit 1 when a migration is needed",
        )
        parser.add_argument(
            "--adopt",
            action="store_true",
            help="objects without a copy were made by hand-written migrations: undoing this one "
            "leaves them in place instead of dropping them",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            made = sql_migration_make(
                app_label=options["app_label"],
                name=options["name"],
                adopt=options["adopt"],
                write=not options["check"],
            )
        except (DatabaseObjectError, LookupError) as error:
            raise CommandError(str(error)) from error
        if made is None:
            self.stdout.write(f"No changes in {options['app_label']}/sql/.")
            return
        names = ", ".join(change.name for change in made.changes)
        if options["check"]:
            self.stdout.write(f"{names}: the files differ from the migrations' copies.")
            raise SystemExit(1)
        self.stdout.write(f"Wrote {made.path} ({names}).")
