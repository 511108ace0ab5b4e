from __future__ import annotations

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The launch checklist lives in annotation, which does not import judges: the judges
        # app adds its own line.
        from annotation.selectors.checklist import CHECKLIST_EXTRA
        from judges import checks  # noqa: F401 - registers the system checks
        from judges.selectors.judges import judges_checklist_item

        if judges_checklist_item not in CHECKLIST_EXTRA:
            CHECKLIST_EXTRA.append(judges_checklist_item)
