from __future__ import annotations

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    default_auto_field = "django.db.models.BigAutoField"
