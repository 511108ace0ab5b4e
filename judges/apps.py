from __future__ import annotations

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from judges import checks  # noqa: F401 - registers the system checks
