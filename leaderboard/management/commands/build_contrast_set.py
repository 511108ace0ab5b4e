"""Build a study's Contrast Instructions from the command line, optionally with their items."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.models import ContrastSet, Study, System
from annotation.selectors.pairs import system_get_by_label
from annotation.services.contrast import ContrastSetError
from annotation.services.pairs import PairsGenerationError, pairs_generate
from judges.reward.encoder import DEFAULT_BACKBONE, BackboneNotFound
from leaderboard.services.contrast import ContrastBuildError, contrast_set_build
from leaderboard.stats.consistency import DEFAULT_WINDOW


class Command(BaseCommand):
    help = (
        "Pair a study's prompts whose questions have a cosine similarity in a window (the PL "
        "model's sentence encoder), each prompt at most once per seed, with each prompt's best "
        "answer, and store them as the study's contrast set for that seed. With --items, also "
        "create the contrast items (each prompt of a pair shown with both best answers)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--study", required=True, help="The study's slug.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the matching.")
        parser.add_argument("--low", type=float, default=DEFAULT_WINDOW[0], help="Lowest cosine.")
        parser.add_argument("--high", type=float, default=DEFAULT_WINDOW[1], help="Highest cosine.")
        parser.add_argument(
            "--best",
            choices=[choice.value for choice in ContrastSet.Best],
            default=ContrastSet.Best.FIRST_RANKED.value,
            help="How each prompt's best answer is chosen.",
        )
        parser.add_argument("--system", help="NAME or NAME:VERSION (with --best system).")
        parser.add_argument("--backbone", default=DEFAULT_BACKBONE, help="Sentence encoder.")
        parser.add_argument(
            "--items", action="store_true", help="Also create the contrast items for workers."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug: str = options["study"]
        try:
            study = Study.objects.get(slug=slug)
        except Study.DoesNotExist as exc:
            raise CommandError(f"No study with slug {slug!r}.") from exc
        best = ContrastSet.Best(options["best"])
        system = None
        if options["system"]:
            try:
                system = system_get_by_label(study=study, label=options["system"])
            except (System.DoesNotExist, System.MultipleObjectsReturned) as exc:
                raise CommandError(f"Unknown system: {exc}") from exc
        if (best == ContrastSet.Best.SYSTEM) != (system is not None):
            raise CommandError("Give --system exactly when --best is 'system'.")
        try:
            built = contrast_set_build(
                study=study,
                seed=options["seed"],
                low=options["low"],
                high=options["high"],
                best=best,
                system=system,
                backbone=options["backbone"],
            )
        except (ContrastBuildError, ContrastSetError, BackboneNotFound, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        state = "stored" if built.stored.created else "already stored"
        self.stdout.write(f"{built.message} Contrast set for seed {options['seed']}: {state}.")
        if options["items"]:
            try:
                items = pairs_generate(study=study, strategy="contrast", seed=options["seed"])
            except PairsGenerationError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(
                f"Contrast items: {items.created} created, {items.already_present} already "
                f"present, {items.skipped_answers} pairs skipped for identity leaks."
            )
