"""Start a judge run on a study from the command line, optionally waiting with a progress bar."""

from __future__ import annotations

import time
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotation.models import Study
from core.broker import BrokerUnavailable
from judges.kinds import judge_kind
from judges.models import Judge, JudgeRun
from judges.selectors.runs import judge_run_progress
from judges.services.runs import JudgeNotReady, judge_run_start


class Command(BaseCommand):
    help = "Start a judge run over a study's pairs (both orders for LLM judges)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="slug of the study")
        parser.add_argument("--judge", required=True, help="name of the judge")
        parser.add_argument("--budget", help="stop claiming calls once this many USD are spent")
        parser.add_argument("--seed", type=int, help="seed for baselines and random orders")
        parser.add_argument(
            "--user", help="username the run is started as (default: the first superuser)"
        )
        parser.add_argument(
            "--wait", action="store_true", help="wait for the run, showing a progress bar"
        )
        parser.add_argument(
            "--poll", type=float, default=1.0, help="seconds between progress checks with --wait"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"no study with slug {options['study']!r}")
        judge = Judge.objects.filter(name=options["judge"]).first()
        if judge is None:
            names = ", ".join(Judge.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"no judge named {options['judge']!r} (judges: {names})")
        user = self._user(options["user"])
        budget = None
        if options["budget"] is not None:
            try:
                budget = Decimal(options["budget"])
            except InvalidOperation as exc:
                raise CommandError(f"--budget {options['budget']!r} is not a number") from exc
        try:
            run = judge_run_start(
                judge=judge, study=study, user=user, budget_usd=budget, seed=options["seed"]
            )
        except (JudgeNotReady, BrokerUnavailable, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        # What was queued, as the run page says it, from the kind's registry entry.
        self.stdout.write(judge_kind(judge.kind).queued(run))
        if options["wait"]:
            self._wait(run, options["poll"])

    def _user(self, username: str | None) -> User:
        if username:
            user = User.objects.filter(username=username, is_active=True).first()
            if user is None:
                raise CommandError(f"no active user {username!r}")
            return user
        user = User.objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
        if user is None:
            raise CommandError("no superuser to start the run as; name a user with --user")
        return user

    def _wait(self, run: JudgeRun, poll: float) -> None:
        progress = judge_run_progress(run=run)
        with tqdm(total=progress.total, unit="call", desc=f"run {run.pk}") as bar:
            while True:
                run.refresh_from_db()
                progress = judge_run_progress(run=run)
                bar.n = progress.finished
                bar.set_postfix(
                    failed=progress.failed,
                    parse_errors=progress.parse_errors,
                    cost=f"${progress.cost_usd}",
                )
                bar.refresh()
                # A PL run stays pending while its answers are scored.
                if run.status not in (JudgeRun.Status.RUNNING, JudgeRun.Status.PENDING):
                    break
                time.sleep(poll)
        self.stdout.write(
            f"run {run.pk} {run.get_status_display().lower()}: {progress.done} done, "
            f"{progress.failed} failed, {progress.parse_errors} parse errors, "
            f"{progress.pending} pending, cost {progress.cost_usd} USD"
        )
