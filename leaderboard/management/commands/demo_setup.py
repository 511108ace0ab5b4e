"""`python manage.py demo_setup`: load the demo study and print the log-ins and URLs.

In leaderboard because it sets up all three apps (the contrast set is leaderboard's), and only
leaderboard may read both of the others."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from annotation.services.demo import demo_setup
from judges.reward.demo import demo_pl_model_queue
from judges.services.demo import demo_judges_ensure
from judges.services.judges import judge_readiness
from leaderboard.services.demo import demo_contrast_ensure

# What each printed log-in is for.
LOGIN_PURPOSE = {
    "admin": "the Django admin (/admin/): studies, forms, judges, users",
    "researcher": "the demo study's pages: import, pairs, judge runs, analysis, workers and pay",
}


class Command(BaseCommand):
    help = "Load the demo study and judges (idempotent), make its pairs, print the log-ins."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        base = options["base_url"].rstrip("/")
        setup = demo_setup()
        contrast = demo_contrast_ensure(study=setup.study)
        judges = demo_judges_ensure(study=setup.study)
        self.stdout.write(
            f"Demo study '{setup.study.slug}': {setup.study.prompts.count()} prompts, "
            f"{setup.study.pairs.count()} pairs ({setup.study.pairs.filter(is_gold=True).count()}"
            " gold)."
        )
        self.stdout.write(contrast)
        slug = setup.study.slug
        self.stdout.write("")
        self.stdout.write(f"  Site:          {base}/")
        self.stdout.write(f"  Study:         {base}/studies/{slug}/")
        self.stdout.write(f"  Import page:   {base}/studies/{slug}/import/")
        self.stdout.write(f"  Judge runs:    {base}/studies/{slug}/judges/")
        self.stdout.write(f"  Analysis:      {base}/studies/{slug}/analysis/")
        self.stdout.write(f"  Admin:         {base}/admin/")
        self.stdout.write(
            f"  Annotate:      {base}/work/{slug}/enter/demo/  (no log-in: each browser that "
            "opens it is a new worker)"
        )
        self.stdout.write("")
        self.stdout.write("Log-ins (passwords kept in var/):")
        for login in setup.logins:
            self.stdout.write(
                f"  {login.role:<11} {login.username:<16} {login.password:<14} "
                f"{LOGIN_PURPOSE[login.role]}"
            )
        self.stdout.write("")
        self.stdout.write("Judges:")
        for judge in judges:
            self.stdout.write(f"  {judge.name!r}: {judge_readiness(judge=judge) or 'ready'}")
        self.stdout.write(f"  {demo_pl_model_queue(study=setup.study)}")
        for judge in judges:
            if judge.study_id is None or not judge.api_key_env:
                continue
            self.stdout.write(
                f"To give {judge.name!r} its API key, log in as the researcher and paste it on "
                f"its page (stored encrypted; no restart): {base}/studies/{slug}/judges/"
                f"{judge.pk}/ , or start the demo with {judge.api_key_env}=... make demo"
            )
        self.stdout.write("")
