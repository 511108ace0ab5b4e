"""Print signed, single-use invite links for a study: `manage.py invite_links SLUG -n 5`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from annotation.models import Study
from annotation.panels import InvitePanel, invite_token_make


class Command(BaseCommand):
    help = "Print signed, single-use invite links for a study."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("-n", "--count", type=int, default=1)
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise CommandError(f"No study with slug {options['slug']!r}.")
        if options["count"] < 1:
            raise CommandError("--count must be at least 1.")
        path = reverse("work:enter", kwargs={"slug": study.slug, "panel": InvitePanel.key})
        for _ in range(options["count"]):
            token = invite_token_make(study=study)
            self.stdout.write(f"{options['base_url'].rstrip('/')}{path}?token={token}")
