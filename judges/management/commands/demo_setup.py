"""`python manage.py demo_setup`: load the demo study and print the log-ins and URLs."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from annotation.services.demo import demo_setup
from judges.services.demo import demo_judges_ensure
from judges.services.judges import judge_readiness


class Command(BaseCommand):
    help = "Load the demo study and judges (idempotent), make its pairs, print the log-ins."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        base = options["base_url"].rstrip("/")
        setup = demo_setup()
        judges = demo_judges_ensure()
        self.stdout.write(
            f"Demo study '{setup.study.slug}': {setup.study.prompts.count()} prompts, "
            f"{setup.study.pairs.count()} pairs ({setup.study.pairs.filter(is_gold=True).count()}"
            " gold)."
        )
        self.stdout.write("")
        self.stdout.write(f"  Site:            {base}/")
        self.stdout.write(f"  Admin:           {base}/admin/")
        self.stdout.write(f"  Researcher:      {base}/studies/{setup.study.slug}/")
        self.stdout.write(f"  Import page:     {base}/studies/{setup.study.slug}/import/")
        self.stdout.write(f"  Judge runs:      {base}/studies/{setup.study.slug}/judges/")
        self.stdout.write(f"  Annotate:        {base}/work/{setup.study.slug}/enter/demo/")
        self.stdout.write("")
        for judge in judges:
            self.stdout.write(f"  judge {judge.name!r}: {judge_readiness(judge=judge) or 'ready'}")
        self.stdout.write("")
        for login in setup.logins:
            self.stdout.write(f"  {login.role:<11} user {login.username:<16} {login.password}")
        self.stdout.write("")
