"""The three roles, as Django groups, and the model permissions each one holds.

Object-level access (which studies a researcher may see) is decided by membership in
`annotation.selectors`, not by these permissions alone.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    ANNOTATOR = "annotator"
    RESEARCHER = "researcher"
    ADMIN = "admin"


# "app_label.codename" for each role. Annotators hold no model permissions: they reach their own
# assignments only through the annotation flow.
RESEARCHER_PERMISSIONS: tuple[str, ...] = (
    "annotation.view_study",
    "annotation.add_study",
    "annotation.change_study",
    "annotation.import_study",
    "annotation.export_study",
    "annotation.view_prompt",
    "annotation.view_system",
    "annotation.view_answer",
    "annotation.change_answer",
    "annotation.view_pair",
    "annotation.add_pair",
    "annotation.view_worker",
    "annotation.view_assignment",
    "annotation.view_humanjudgment",
    "judges.view_judge",
    "judges.add_judge",
    "judges.change_judge",
    "judges.view_judgerun",
    "judges.add_judgerun",
    "judges.change_judgerun",
    "judges.view_judgecall",
    "judges.view_answerscore",
)
ADMIN_APPS: tuple[str, ...] = ("annotation", "judges", "leaderboard")
