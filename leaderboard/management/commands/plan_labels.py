"""Answer the label budget planner's question from the command line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study
from leaderboard.report import label_budget
from leaderboard.report.document import report_from_payload
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services.reports import (
    ReportParams,
    agreement_report_snapshot,
    snapshot_payload_required,
)


class Command(BaseCommand):
    help = (
        "How many more human judgments a judge's agreement interval needs to reach a target half "
        "width, and what they cost at the study's pay; without --target, each judge's projection "
        "at more votes. Reads the stored report (computing it first if there is none)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--judge", help="judge name (default: every judge)")
        parser.add_argument(
            "--target", type=float, help="target half width in ± percentage points, e.g. 3"
        )
        parser.add_argument(
            "--prompts", type=int, help="prompts the votes will cover (default: those so far)"
        )
        parser.add_argument(
            "--pay-cents",
            type=int,
            help="pay per judgment in cents (default: the study's pay per judgment)",
        )
        parser.add_argument("--turn", type=int, help="only pairs at this turn")
        parser.add_argument("--category", help="only prompts of this category")
        parser.add_argument("--raters", choices=["experts", "all"])

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist as exc:
            raise CommandError(f"--study {options['study']!r}: no such study") from exc
        if options["target"] is not None and not 0 < options["target"] <= 50:
            raise CommandError("--target must be between 0 and 50 percentage points")
        pay = options["pay_cents"] if options["pay_cents"] is not None else None
        if pay is not None and pay < 0:
            raise CommandError("--pay-cents must not be negative")
        pay = study.pay_per_judgment_cents if pay is None else pay
        filters = VoteFilters(
            category=options["category"], turn=options["turn"], raters=options["raters"]
        )
        snapshot = agreement_report_snapshot(study=study, filters=filters, params=ReportParams())
        report = report_from_payload(snapshot_payload_required(snapshot.payload))
        result = report.result(label_budget.SECTION)
        judges = [j for j in report.context.judges if j in result.judges]
        if options["judge"] is not None:
            if options["judge"] not in result.judges:
                known = ", ".join(repr(j) for j in judges) or "none"
                raise CommandError(
                    f"--judge {options['judge']!r}: no verdicts shared with the people's votes "
                    f"in this report (judges with a budget: {known})"
                )
            judges = [options["judge"]]
        if not judges:
            raise CommandError("no judge shares units with the people's votes yet")
        self.stdout.write(f"{study.slug}: {result.human_votes} human votes so far.")
        for judge in judges:
            budget = result.judges[judge]
            self.stdout.write(
                f"{judge}: ± {100 * budget.half_width:.1f} points now over "
                f"{budget.components.prompts} prompts (floor ± {100 * budget.floor_half_width:.1f}"
                "); with more votes on the same prompts:"
            )
            for point in budget.points:
                self.stdout.write(
                    f"  {point.human_votes:>7} votes ({point.multiplier:g}x): "
                    f"± {100 * point.half_width:.1f} points"
                )
            if options["target"] is None:
                continue
            try:
                answer = label_budget.label_budget_plan(
                    result,
                    judge=judge,
                    target_half_width=options["target"] / 100,
                    cents_per_judgment=pay,
                    prompts=options["prompts"],
                )
            except ValueError as exc:
                raise CommandError(f"--prompts: {exc}") from exc
            self.stdout.write(label_budget.plan_sentence(answer, cents_per_judgment=pay))
