"""Write a study's agreement report as JSON, CSV or HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study
from leaderboard.report.document import report_from_payload
from leaderboard.report.html import report_to_html
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services.reports import (
    ReportParams,
    agreement_report_snapshot,
    report_to_csv,
    report_to_json,
    snapshot_payload_required,
)


class Command(BaseCommand):
    help = (
        "Compute a study's agreement report (stored as a snapshot) and write it as JSON, CSV or "
        "HTML to --output or standard output."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--format", choices=["json", "csv", "html"], default="json")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--output", type=Path, help="file to write (default: stdout)")
        parser.add_argument("--turn", type=int, help="only pairs at this turn")
        parser.add_argument("--category", help="only prompts of this category")
        parser.add_argument("--exclude-gold", action="store_true", help="leave gold pairs out")
        parser.add_argument(
            "--judge-run", type=int, action="append", help="only this judge run (repeatable)"
        )
        parser.add_argument(
            "--raters",
            choices=["experts", "all"],
            help="experts: only raters named expert_*; default experts when the study has them",
        )
        parser.add_argument("--elo-rounds", type=int, default=ReportParams.elo_rounds)
        parser.add_argument("--bt-rounds", type=int, default=ReportParams.bt_rounds)
        parser.add_argument("--ci-rounds", type=int, default=ReportParams.ci_rounds)
        parser.add_argument(
            "--resample",
            choices=["prompt", "vote"],
            default=ReportParams.resample,
            help="what the agreement, Elo and Bradley-Terry bootstraps draw (default: prompts)",
        )
        parser.add_argument(
            "--baseline",
            default=ReportParams.baseline,
            help="the system the length-controlled win rates compare every model with "
            "(default: the system in the most pairs)",
        )
        parser.add_argument(
            "--pl-usd-per-1000",
            type=float,
            default=ReportParams.pl_usd_per_1000,
            help="the price of a PL reward model's compute, USD per 1,000 pairs (default: not "
            "priced)",
        )
        parser.add_argument(
            "--recompute",
            action="store_true",
            help="compute again even when the stored report is current (rows edited in place)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist as exc:
            raise CommandError(f"--study {options['study']!r}: no such study") from exc
        for name in ("elo_rounds", "bt_rounds", "ci_rounds"):
            if options[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
        filters = VoteFilters(
            category=options["category"],
            turn=options["turn"],
            exclude_gold=options["exclude_gold"],
            judge_run_ids=tuple(options["judge_run"]) if options["judge_run"] else None,
            raters=options["raters"],
        )
        params = ReportParams(
            seed=options["seed"],
            ci_rounds=options["ci_rounds"],
            elo_rounds=options["elo_rounds"],
            bt_rounds=options["bt_rounds"],
            resample=options["resample"],
            baseline=options["baseline"],
            pl_usd_per_1000=options["pl_usd_per_1000"],
        )
        snapshot = agreement_report_snapshot(
            study=study, filters=filters, params=params, recompute=options["recompute"]
        )
        report = snapshot_payload_required(snapshot.payload)
        if options["format"] == "json":
            data = report_to_json(report)
        elif options["format"] == "csv":
            data = report_to_csv(report)
        else:
            data = report_to_html(report_from_payload(report), study=study)
        if options["output"] is None:
            self.stdout.write(data.decode("utf-8"), ending="")
        else:
            options["output"].write_bytes(data)
            self.stderr.write(f"Wrote {options['output']} ({len(data)} bytes).")
