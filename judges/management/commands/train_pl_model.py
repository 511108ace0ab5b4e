"""Queue the training of a Plackett-Luce reward model on a study, and follow it with a bar."""

from __future__ import annotations

import time
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotation.models import Study
from core.broker import BrokerUnavailable
from judges.management.commands.judge_run import Command as JudgeRunCommand
from judges.models import PLTraining
from judges.reward.data import SOURCES, TIES_DROP, TIES_HALF
from judges.reward.encoder import DEFAULT_BACKBONE
from judges.reward.losses import K_CHOICES, RECIPES
from judges.reward.services import BACKBONE_MODES, TrainingRequest, pl_training_start


class Command(BaseCommand):
    help = (
        "Train a PL reward model on a study's ranked lists and/or human labels (on a "
        "reward_model worker); it becomes a judge of kind PL when done."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="slug of the study")
        parser.add_argument("--name", required=True, help="name of the judge it becomes")
        parser.add_argument("--recipe", choices=RECIPES, default="listwise")
        parser.add_argument("--k", choices=K_CHOICES, default="all", help="top-K of each list")
        parser.add_argument(
            "--sources",
            default=",".join(SOURCES),
            help="comma-separated: ranked (rank/upvotes lists), human (pairwise judgments)",
        )
        parser.add_argument("--ties", choices=(TIES_DROP, TIES_HALF), default=TIES_DROP)
        parser.add_argument(
            "--likert-weights", action="store_true", help="weigh human pairs by Likert strength"
        )
        parser.add_argument("--mode", choices=BACKBONE_MODES, default="head")
        parser.add_argument("--backbone", default=DEFAULT_BACKBONE)
        parser.add_argument(
            "--checkpoint",
            default="",
            help="folder under CONCORD_PL_CHECKPOINTS_ROOT (--mode hf)",
        )
        parser.add_argument("--epochs", type=int, default=40)
        parser.add_argument("--lr", type=float, default=1e-3)
        parser.add_argument("--hidden", type=int, default=256)
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--holdout", type=float, default=0.2, help="share of prompts held out")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--user", help="username (default: the first superuser)")
        parser.add_argument("--no-wait", action="store_true", help="queue it and return")
        parser.add_argument("--poll", type=float, default=1.0)

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"no study with slug {options['study']!r}")
        user = JudgeRunCommand()._user(options["user"])
        request = TrainingRequest(
            name=options["name"],
            recipe=options["recipe"],
            k=options["k"],
            sources=tuple(s.strip() for s in options["sources"].split(",") if s.strip()),
            ties=options["ties"],
            likert_weights=options["likert_weights"],
            mode=options["mode"],
            backbone=options["backbone"],
            checkpoint=options["checkpoint"],
            epochs=options["epochs"],
            learning_rate=options["lr"],
            hidden=options["hidden"],
            batch_size=options["batch_size"],
            holdout=options["holdout"],
            seed=options["seed"],
        )
        try:
            training = pl_training_start(study=study, user=user, request=request)
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {m}" for field, ms in exc.message_dict.items() for m in ms)
            ) from exc
        except (BrokerUnavailable, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        summary = training.data_summary
        self.stdout.write(
            f"training {training.pk} queued: {summary.get('lists', 0)} ranked lists, "
            f"{summary.get('pairs', 0)} human pairs, seed {training.seed}"
        )
        if not options["no_wait"]:
            self._wait(training, options["poll"])

    def _wait(self, training: PLTraining, poll: float) -> None:
        with tqdm(total=training.epochs, unit="epoch", desc=f"training {training.pk}") as bar:
            while True:
                training.refresh_from_db()
                bar.n = training.epoch
                if training.curve:
                    last = training.curve[-1]
                    bar.set_postfix(loss=f"{last['train_loss']:.4f}", status=training.status)
                bar.refresh()
                if training.is_terminal:
                    break
                time.sleep(poll)
        if training.status != PLTraining.Status.DONE:
            raise CommandError(f"training {training.pk} {training.status}: {training.error}")
        held = training.metrics.get("held_out", {})
        self.stdout.write(
            f"training {training.pk} done: judge {training.name!r}; held-out NDCG@3 "
            f"{held.get('ndcg@3')}, 1st-vs-2nd {held.get('first_vs_second')}, "
            f"1st-vs-last {held.get('first_vs_last')}, pair accuracy {held.get('pair_accuracy')}"
        )
