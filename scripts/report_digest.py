"""Print the sha256 of the report JSON of the demo study and of MT-Bench, to show that a change
of code layout leaves every reported number as it was.

    .venv/bin/python scripts/report_digest.py [--dump DIR]

(`--dump DIR` also writes each report's JSON there, to diff two runs.)

It makes a throwaway database (`test_<your database>_digest`, dropped at the end) on the server
DATABASE_URL names, loads the demo study (`demo_setup`'s study: the fixture, its pairs and gold
pairs) and MT-Bench's published labels (both turns, from the shared data folder, as the MT-Bench
tests load them), writes each study's report with `manage.py agreement_report` (seed 0, the
MT-Bench tests' short rounds so that it runs in about a minute) and prints one digest per study.
The payload holds no clock-dependent field (leaderboard/report/document.py: no time, no host),
so the digest is of the bytes `agreement_report` writes; it is also checked that they are the
canonical form (sorted keys) of the JSON they parse to. Run it before and after a change: the
lines must be identical.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAST = ["--seed=0", "--elo-rounds=5", "--bt-rounds=5", "--ci-rounds=20"]


def _digest(slug: str, dump: Path | None) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("agreement_report", f"--study={slug}", *FAST, stdout=out)
    data = out.getvalue().encode()
    canonical = json.dumps(json.loads(data), sort_keys=True, ensure_ascii=False)
    if json.loads(canonical) != json.loads(data):  # pragma: no cover - a guard
        raise SystemExit(f"{slug}: the report does not read back as itself")
    if dump is not None:
        (dump / f"{slug}.json").write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def main() -> int:
    dump = Path(sys.argv[2]) if len(sys.argv) == 3 and sys.argv[1] == "--dump" else None
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_test_environment

    from annotation.services.demo import demo_setup
    from tests.leaderboard.mtbench_data import mtbench_load

    setup_test_environment()
    name = settings.DATABASES["default"]["NAME"]
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = f"test_{name}_digest"
    original = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        study = demo_setup().study
        mtbench_load("mt-bench")
        for slug in (study.slug, "mt-bench"):
            print(f"{slug} {_digest(slug, dump)}")
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
