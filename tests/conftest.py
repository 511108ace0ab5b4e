"""The shared cast: an admin, a researcher, two workers in one study and an outsider in none.

Every permission test says who may and who may not, using these same people.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User

from annotation.models import Study, Worker
from annotation.roles import Role
from annotation.services.roles import study_member_add, user_role_grant

PASSWORD = "correct-horse-battery-staple"


@dataclass(frozen=True)
class Cast:
    study: Study
    other_study: Study
    admin: User
    researcher: User
    worker_one: Worker
    worker_two: Worker
    outsider: User


def make_user(username: str, role: Role | None) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user_role_grant(user=user, role=role)
    return user


@pytest.fixture
def cast(db: None) -> Cast:
    study = Study.objects.create(slug="main-study", name="Main study", status=Study.Status.LIVE)
    other = Study.objects.create(slug="other-study", name="Other study")
    admin = make_user("ada-admin", Role.ADMIN)
    researcher = make_user("rhea-researcher", Role.RESEARCHER)
    study_member_add(study=study, user=researcher)
    workers = []
    for name in ("wendy-worker", "walt-worker"):
        user = make_user(name, Role.ANNOTATOR)
        workers.append(
            Worker.objects.create(
                study=study, user=user, panel=Worker.Panel.PROLIFIC, external_id=f"PID-{name}"
            )
        )
    outsider = make_user("otto-outsider", None)
    return Cast(
        study=study,
        other_study=other,
        admin=admin,
        researcher=researcher,
        worker_one=workers[0],
        worker_two=workers[1],
        outsider=outsider,
    )
