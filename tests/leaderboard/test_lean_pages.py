"""A web process that only serves report snapshots loads no analysis library: the analysis page,
the JSON report, a table's CSV, a plot's SVG and the HTML report read the stored snapshot back
into typed results, which needs numpy and nothing heavier (scipy, pandas, pyarrow and numba
cost a process about 200 MB). The analysis worker, which computes, still loads them when it
computes. Each is run in a fresh Python process, since this one has imported everything."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from tests.config.django_process import ROOT, child_env
from tests.conftest import Cast
from tests.leaderboard.conftest import get_computed

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Run in a fresh process: argv[1] the researcher's username, argv[2] the study's slug. Prints one
# JSON line: each page's status and whether it was the snapshot, the heavy modules loaded, the
# process's max RSS, then the same after the analysis worker's job computed a new snapshot.
SERVE = r"""
import json, re, sys

import django

django.setup()

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

HEAVY = ("scipy", "pandas", "pyarrow", "numba")
username, slug = sys.argv[1], sys.argv[2]


def peak_rss_kb():
    # The peak of this process's own memory (VmHWM). getrusage's ru_maxrss is no use here: Linux
    # carries the forking parent's peak into it across exec.
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
client = Client()
client.force_login(User.objects.get(username=username))


def get(view, **kwargs):
    response = client.get(reverse(f"leaderboard:{view}", kwargs={"slug": slug, **kwargs}))
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body


pages = {}
page, html = get("study_analysis")
pages["analysis"] = (page.status_code, b'id="report-progress"' not in html)
table = re.search(rb"/analysis/tables/([\w-]+)\.csv", html).group(1).decode()
plot = re.search(rb"/analysis/plots/([\w-]+)\.svg", html).group(1).decode()
response, body = get("study_analysis_report")
keys = set(json.loads(body))
pages["report.json"] = (response.status_code, {"metadata", "leaderboards"} <= keys)
response, body = get("study_analysis_table", name=table)
pages["table.csv"] = (response.status_code, response["Content-Type"].startswith("text/csv"))
response, body = get("study_analysis_plot", name=plot)
pages["plot.svg"] = (response.status_code, body.startswith(b"<svg"))
response, body = get("study_analysis_report_html")
pages["report.html"] = (response.status_code, b'id="report-progress"' not in body)
served = {
    "pages": pages,
    "loaded": [m for m in HEAVY if m in sys.modules],
    "max_rss_kb": peak_rss_kb(),
}

# The analysis worker's job for a report the page has not seen (turn 1 only): it computes.
from leaderboard.models import ReportSnapshot
from leaderboard.services.reports import report_snapshot_compute

client.get(reverse("leaderboard:study_analysis", kwargs={"slug": slug}), {"turn": "1"})
queued = ReportSnapshot.objects.filter(queued_at__isnull=False).values_list("pk", flat=True)
computed = [report_snapshot_compute(snapshot_id=pk) for pk in list(queued)]
worker = {
    "computed": computed,
    "loaded": [m for m in HEAVY if m in sys.modules],
    "max_rss_kb": peak_rss_kb(),
}
print(json.dumps({"served": served, "worker": worker}))
"""


def _run_fresh(username: str, slug: str) -> dict[str, dict[str, Any]]:
    """SERVE in a new Python process on this test's database."""
    return _child(SERVE, username, slug)


def _child(code: str, *args: str) -> dict[str, Any]:
    """The last line of `code`'s output, as JSON, run in a new Python process on this test's
    database."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=child_env(DJANGO_SETTINGS_MODULE="config.settings.test"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_serving_a_snapshot_loads_no_analysis_library_and_the_worker_still_computes(
    client: Client, cast: Cast, export_study: Study
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[export_study.slug]))
    assert page.status_code == 200 and b'id="report-progress"' not in page.content

    result = _run_fresh(cast.researcher.username, export_study.slug)
    served, worker = result["served"], result["worker"]
    print(f"max RSS: serving {served['max_rss_kb']} kB, after computing {worker['max_rss_kb']} kB")
    assert served["pages"] == {
        "analysis": [200, True],
        "report.json": [200, True],
        "table.csv": [200, True],
        "plot.svg": [200, True],
        "report.html": [200, True],
    }
    assert served["loaded"] == []
    assert worker["computed"] == ["computed"]
    assert {"scipy", "pandas", "numba"} <= set(worker["loaded"])


WARM = """
import json, sys
import django
django.setup()
import leaderboard.tasks  # what a Celery worker imports with the task modules
before = [m for m in ("scipy", "pandas", "pyarrow", "numba") if m in sys.modules]
from celery.signals import worker_process_init
from config.celery import app
# What `celery worker -Q <queues>` does before it starts its processes.
app.amqp.queues.select(sys.argv[1].split(","))
worker_process_init.send(sender=None)
after = [m for m in ("scipy.stats", "scipy.special", "scipy.sparse", "pandas", "pyarrow.csv",
                     "pyarrow.compute", "numba") if m in sys.modules]
print(json.dumps({"before": before, "after": after}))
"""


def test_an_analysis_worker_process_loads_the_analysis_libraries_as_it_starts_not_on_import() -> (
    None
):
    """Importing the task modules keeps a process lean (a web process imports them to send
    tasks); a process of a worker that serves the analysis queue loads what a report computes
    with as it starts, so that its first report does not pay the imports inside whichever
    section first needs them; a worker of other queues stays lean."""
    for queues in ("default", "llm_judge,export"):
        assert _child(WARM, queues) == {"before": [], "after": []}, queues
    result = _child(WARM, "default,analysis")
    assert result["before"] == []
    assert result["after"] == [
        "scipy.stats",
        "scipy.special",
        "scipy.sparse",
        "pandas",
        "pyarrow.csv",
        "pyarrow.compute",
        "numba",
    ]
