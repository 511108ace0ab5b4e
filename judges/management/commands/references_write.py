"""Have a reference judge write the reference answers a study's reference categories lack."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study
from core.errors import ApplicationError
from judges.models import Judge
from judges.services.references import references_write


class Command(BaseCommand):
    help = (
        "Ask an LLM judge for a reference answer to each prompt of the study's reference "
        "categories that has none; written references are frozen like imported ones."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="slug of the study")
        parser.add_argument("--judge", required=True, help="name of the reference judge")
        parser.add_argument(
            "--categories",
            nargs="+",
            help="categories to write references for (default: the study's reference categories)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"no study with slug {options['study']!r}")
        judge = Judge.objects.filter(name=options["judge"]).first()
        if judge is None:
            raise CommandError(f"no judge named {options['judge']!r}")
        try:
            result = references_write(study=study, judge=judge, categories=options["categories"])
        except ApplicationError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"categories {', '.join(result.categories)}: {len(result.written)} references "
            f"written ({result.source}), {len(result.failed)} failed, "
            f"{len(result.kept)} set meanwhile and kept, {len(result.reused)} stored from the "
            f"ledger's replies; {result.cost_usd} USD on the ledger (judges_referencecall)"
        )
        for failure in result.failed:
            self.stderr.write(f"prompt {failure.external_id}: no reference ({failure.reason})")
        if result.failed:
            raise CommandError(f"{len(result.failed)} prompts got no reference; run again")
