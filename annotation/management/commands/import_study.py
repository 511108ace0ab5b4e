"""`manage.py import_study --study SLUG [--create-study] [--dry-run] [--add-systems] PATH`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from tqdm import tqdm

from annotation.models import Study
from annotation.services.importing import (
    ImportProgress,
    ImportResult,
    StudyImportError,
    study_draft_get_or_create,
    study_import,
)


class Command(BaseCommand):
    help = "Import systems, prompts and answers from a JSONL or CSV file into a study."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="The .jsonl, .ndjson or .csv file.")
        parser.add_argument("--study", required=True, help="The study's slug.")
        parser.add_argument(
            "--create-study", action="store_true", help="Create a draft study if none has the slug."
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Check the file and report; write nothing."
        )
        parser.add_argument(
            "--add-systems",
            action="store_true",
            help="Create systems that answers name but the file does not declare.",
        )
        parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        slug: str = options["study"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        bars: dict[str, tqdm] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if options["no_progress"]:
                return
            bar = bars.get(phase)
            if bar is None:
                for finished in bars.values():
                    finished.close()
                bar = bars[phase] = tqdm(
                    total=total, desc=phase, unit="B", unit_scale=True, file=sys.stderr
                )
            bar.update(done - bar.n)

        try:
            result = self._import(path, slug, options, progress)
        except StudyImportError as exc:
            raise CommandError(
                "the file was not imported:\n" + "\n".join(exc.lines(str(path)))
            ) from exc
        finally:
            for bar in bars.values():
                bar.close()
        self.stdout.write(self._summary(result))

    def _import(
        self, path: Path, slug: str, options: dict[str, Any], progress: ImportProgress
    ) -> ImportResult:
        with transaction.atomic():
            if options["create_study"]:
                study, created = study_draft_get_or_create(slug=slug)
            else:
                created = False
                try:
                    study = Study.objects.get(slug=slug)
                except Study.DoesNotExist as exc:
                    raise CommandError(
                        f"no study with slug '{slug}'; pass --create-study to create a draft"
                    ) from exc
            result = study_import(
                study=study,
                path_or_file=path,
                dry_run=options["dry_run"],
                add_systems=options["add_systems"],
                progress=progress,
            )
            if options["dry_run"] and created:
                # A dry run leaves no trace, not even the draft study it needed to check against.
                transaction.set_rollback(True)
            return result

    def _summary(self, result: ImportResult) -> str:
        verb = "would be" if result.dry_run else "were"
        lines = ["Dry run: nothing was written." if result.dry_run else "Imported."]
        for noun in ("systems", "prompts", "answers"):
            created = getattr(result, f"{noun}_created")
            updated = getattr(result, f"{noun}_updated")
            unchanged = getattr(result, f"{noun}_unchanged")
            lines.append(
                f"{noun}: {created} {verb} created, {updated} {verb} updated, {unchanged} unchanged"
            )
        lines.append(f"answers flagged for naming a model or its maker: {result.answers_flagged}")
        return "\n".join(lines)
