"""Export a study's pairs, human judgments or judge calls as CSV, JSONL or Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study
from leaderboard.selectors.exports import EXPORT_TABLES
from leaderboard.services.exports import EXPORT_FORMATS, study_export_write


class Command(BaseCommand):
    help = "Write one table of a study's raw rows (pairs, judgments, calls) to a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True)
        parser.add_argument("--table", required=True, choices=sorted(EXPORT_TABLES))
        parser.add_argument("--format", required=True, choices=EXPORT_FORMATS)
        parser.add_argument("--output", required=True, type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist as exc:
            raise CommandError(f"--study {options['study']!r}: no such study") from exc
        output: Path = options["output"]
        with output.open("wb") as out:
            rows = study_export_write(
                study=study, table=options["table"], fmt=options["format"], out=out
            )
        self.stderr.write(f"Wrote {output} ({rows} rows, {output.stat().st_size} bytes).")
