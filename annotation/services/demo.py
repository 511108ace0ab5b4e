"""Set up the demo: the demo study, its pairs and two log-ins. Used by `make demo` only.

Annotating needs no log-in: the demo entry panel (/work/demo/enter/demo/) makes a worker per
browser, as a Prolific link would.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import Study
from annotation.roles import Role
from annotation.services.importing import ImportResult, study_import
from annotation.services.pairs import PairsResult, gold_pairs_generate, pairs_generate
from annotation.services.roles import study_member_add, user_role_grant

DEMO_SLUG = "demo"
DEMO_FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "demo_study.jsonl"
DEMO_INSTRUCTIONS = """\
You will see a question and two answers written by AI assistants. Read both, then say which one
is better, and by how much, on the eight-point scale. Judge helpfulness, correctness and clarity;
do not reward length for its own sake. Then tick the qualities that make the better answer better.

Keys: 1-8 choose a score; Enter submits.
"""


@dataclass(frozen=True)
class DemoLogin:
    role: str
    username: str
    password: str


@dataclass(frozen=True)
class DemoSetup:
    study: Study
    logins: tuple[DemoLogin, ...]
    imported: ImportResult
    pairs: PairsResult
    gold: PairsResult


def _login(username: str, role: Role, *, superuser: bool = False) -> DemoLogin:
    """Create the user once with a random password; later runs keep it (it is printed again
    from the demo's own file under var/)."""
    store = Path(settings.CONCORD_VAR_DIR) / f"demo-password-{username}"
    if not store.exists():
        store.parent.mkdir(exist_ok=True)
        # Owner-only: the embedded PostgreSQL's system user may traverse var/ (see README).
        descriptor = os.open(store, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_urlsafe(9))
    password = store.read_text().strip()
    user, created = User.objects.get_or_create(username=username)
    if created or not user.check_password(password):
        user.set_password(password)
    user.is_superuser = superuser
    user.is_staff = superuser
    user.save()
    user_role_grant(user=user, role=role)
    return DemoLogin(role=role.value, username=username, password=password)


@transaction.atomic
def demo_setup() -> DemoSetup:
    """Load the demo study (idempotent), make its pairs and gold pairs, and the demo log-ins:
    an admin (the Django admin) and a researcher (the study's pages)."""
    study, _ = Study.objects.get_or_create(
        slug=DEMO_SLUG,
        defaults={
            "name": "Demo: which answer is more helpful?",
            "description": "34 prompts in 8 categories, 4 fictional systems, 6 ranked lists.",
            "instructions": DEMO_INSTRUCTIONS,
            "status": Study.Status.LIVE,
            "form_values": True,
            "form_acceptability": False,
            "overlap": 3,
            "target_per_worker": 10,
            # Judges that are reference-guided see the fixture's worked answers for math.
            "reference_categories": ["math"],
        },
    )
    imported = study_import(study=study, path_or_file=DEMO_FIXTURE)
    pairs = pairs_generate(study=study, strategy="all", turns="last", seed=0)
    gold = gold_pairs_generate(study=study, kind="first_vs_last", seed=0)
    admin = _login("demo-admin", Role.ADMIN, superuser=True)
    researcher = _login("demo-researcher", Role.RESEARCHER)
    study_member_add(study=study, user=User.objects.get(username=researcher.username))
    return DemoSetup(
        study=study,
        logins=(admin, researcher),
        imported=imported,
        pairs=pairs,
        gold=gold,
    )
