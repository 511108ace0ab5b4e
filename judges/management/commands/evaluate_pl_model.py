"""AdvisorQA's Table 3 for PL models on a study's held-out prompts, beside every other ranker."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotation.models import Study
from judges.models import Judge
from judges.reward.artifacts import ArtifactMissing
from judges.reward.data import TrainingInputError
from judges.reward.evaluation import evaluation_table

COLUMNS = ("ndcg_2", "ndcg_3", "ndcg_5", "first_vs_second", "first_vs_last")


def _cell(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


class Command(BaseCommand):
    help = (
        "Print NDCG@2/3/5 and 1st-vs-2nd / 1st-vs-last accuracy of PL models, the random and "
        "longer-answer rankers, the other judges and people on a study's held-out prompts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="slug of the study")
        parser.add_argument(
            "--judge", action="append", default=[], help="a PL judge's name (repeatable)"
        )
        parser.add_argument(
            "--prompts",
            choices=("held-out", "all"),
            default="held-out",
            help="held-out: the first named model's held-out prompts",
        )
        parser.add_argument("--seed", type=int, default=0, help="seed of the random ranker")
        parser.add_argument("--json", action="store_true", help="print the rows as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"no study with slug {options['study']!r}")
        judges = []
        for name in options["judge"]:
            judge = Judge.objects.filter(name=name, kind=Judge.Kind.PL).first()
            if judge is None:
                raise CommandError(f"no PL judge named {name!r}")
            judges.append(judge)
        if not judges:
            judges = list(Judge.objects.filter(kind=Judge.Kind.PL, pl_training__study=study))
        with tqdm(total=len(judges), unit="model", desc="scoring") as bar:

            def step(name: str) -> None:
                bar.set_postfix(model=name)
                bar.update(1)

            try:
                result = evaluation_table(
                    study=study,
                    pl_judges=judges,
                    prompts=options["prompts"],
                    seed=options["seed"],
                    progress=step,
                )
            except (TrainingInputError, ArtifactMissing) as exc:
                raise CommandError(str(exc)) from exc
        if options["json"]:
            payload = {
                "prompts": result.prompts,
                "lists": result.lists,
                "rows": [
                    {
                        k: (None if isinstance(v, float) and math.isnan(v) else v)
                        for k, v in asdict(row).items()
                    }
                    for row in result.rows
                ],
            }
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(f"{result.lists} ranked lists on the {result.prompts} prompts")
        width = max(len(row.source) for row in result.rows)
        header = f"{'ranker':<{width}}  {'ranking':<7}  lists  NDCG@2 NDCG@3 NDCG@5  1v2    1vlast"
        self.stdout.write(header)
        for row in result.rows:
            cells = " ".join(f"{_cell(getattr(row, c)):>6}" for c in COLUMNS)
            self.stdout.write(f"{row.source:<{width}}  {row.ranking:<7}  {row.lists:>5}  {cells}")
