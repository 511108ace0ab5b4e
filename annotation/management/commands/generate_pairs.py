"""Generate a study's pairs from the command line: regular pairs by a strategy, and gold pairs."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Study, System
from annotation.selectors.pairs import system_get_by_label
from annotation.services.pairs import (
    STRATEGIES,
    PairsGenerationError,
    PairsResult,
    gold_pairs_generate,
    pairs_generate,
)
from core.conventions import GOLD_KINDS


class Command(BaseCommand):
    help = (
        "Generate pairs for a study: all system pairs, each system against a baseline, or k "
        "sampled pairs per prompt; optionally gold pairs from ranked answers. Re-running is safe."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--study", required=True, help="The study's slug.")
        parser.add_argument("--strategy", choices=STRATEGIES, help="How to choose regular pairs.")
        parser.add_argument(
            "--baseline", help="Baseline system as NAME or NAME:VERSION (strategy baseline)."
        )
        parser.add_argument("--k", type=int, help="Pairs per prompt (strategy sample).")
        parser.add_argument(
            "--turns", choices=("all", "last"), default="all", help="Which turns get pairs."
        )
        parser.add_argument("--seed", type=int, default=0, help="Seed of the sampling.")
        parser.add_argument(
            "--gold", choices=GOLD_KINDS, help="Also add gold pairs of this kind afterwards."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug: str = options["study"]
        strategy: str | None = options["strategy"]
        if strategy is None and options["gold"] is None:
            raise CommandError("Give --strategy, --gold or both.")
        try:
            study = Study.objects.get(slug=slug)
        except Study.DoesNotExist as exc:
            raise CommandError(f"No study with slug {slug!r}.") from exc
        baseline = None
        if options["baseline"]:
            try:
                baseline = system_get_by_label(study=study, label=options["baseline"])
            except (System.DoesNotExist, System.MultipleObjectsReturned) as exc:
                raise CommandError(f"Unknown baseline system: {exc}") from exc
        if strategy == "baseline" and baseline is None:
            raise CommandError("--strategy baseline needs --baseline NAME[:VERSION].")
        if strategy == "sample" and options["k"] is None:
            raise CommandError("--strategy sample needs --k N (pairs per prompt).")
        try:
            if strategy is not None:
                result = pairs_generate(
                    study=study,
                    strategy=strategy,  # type: ignore[arg-type]  # argparse checked the choices
                    baseline_system=baseline,
                    k=options["k"],
                    turns=options["turns"],
                    seed=options["seed"],
                )
                self._report(f"{strategy} pairs", result)
            if options["gold"] is not None:
                gold = gold_pairs_generate(study=study, kind=options["gold"], seed=options["seed"])
                self._report(f"gold pairs ({options['gold']})", gold)
        except PairsGenerationError as exc:
            raise CommandError(str(exc)) from exc

    def _report(self, what: str, result: PairsResult) -> None:
        line = (
            f"{what}: {result.created} created, {result.already_present} already present, "
            f"{result.skipped_answers} flagged answers skipped"
        )
        if result.marked_gold:
            line += f", {result.marked_gold} existing pairs marked gold"
        if result.prompts_without_baseline:
            line += f", {result.prompts_without_baseline} prompts without a baseline answer"
        self.stdout.write(line)
