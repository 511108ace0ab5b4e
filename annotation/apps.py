from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_roles(sender: AppConfig, **kwargs: Any) -> None:
    # Permissions exist only after migrate creates them (app by app, on this same signal), so
    # the groups are synced after every app's post_migrate; the last call sees them all.
    from annotation.services.roles import roles_sync

    roles_sync()


class AnnotationConfig(AppConfig):
    name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_sync_roles, dispatch_uid="annotation_sync_roles")
