"""A web worker's start, first request and memory, lean against the former URL configuration.

Each figure is measured in a new process that does what a gunicorn worker does: import
config.wsgi (Django set up, URLs loaded), then answer its first request (the log-in page, through
every middleware), then report its resident memory (VmRSS). The baseline process first imports
the analysis views and API, as the URL configuration did before core/lazyviews.py, and the
libraries those imports pulled in until the pages stopped needing them (74ce4f1): pandas,
scipy.stats, pyarrow and the compiled Elo kernel with numba. Importing the views alone no longer
loads any of them, so without the libraries the baseline would measure nothing of what a worker
used to hold. Prints one JSON object per mode.

    DATABASE_URL=... .venv/bin/python benchmarks/bench_web.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys, time
began = time.perf_counter()
if sys.argv[1] == "eager":
    import django
    django.setup()
    import leaderboard.api, leaderboard.views, leaderboard.views_followup  # the former imports
    import pandas, pyarrow, scipy.stats, leaderboard.stats.elo_kernel  # what they pulled in
import config.wsgi
ready = time.perf_counter()
from django.test import Client
response = Client().get("/accounts/login/")
first = time.perf_counter()
Client().get("/accounts/login/")
second = time.perf_counter()
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:"))
heavy = sorted(m for m in ("scipy", "numba", "pandas", "pyarrow") if m in sys.modules)
print(json.dumps({"mode": sys.argv[1], "status": response.status_code,
                  "boot_s": ready - began, "first_request_s": first - ready,
                  "second_request_s": second - first, "rss_mb": rss / 1024, "heavy": heavy}))
"""


def probe(mode: str) -> dict[str, object]:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    for mode in ("lean", "eager"):
        print(json.dumps(probe(mode)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
