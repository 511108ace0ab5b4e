"""A web process that serves annotators never imports the analysis libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.config.django_process import ROOT, child_env
from tests.conftest import Cast

HEAVY = ("scipy", "numba", "pandas")

PROBE = """
import json, sys
import django
django.setup()
from django.test import Client
from django.urls import reverse
import config.urls
# Every name reverses (templates do this) without importing a view.
reverse("leaderboard:study_analysis", args=["x"])
reverse("leaderboard_api:study_report", args=["x"])
client = Client()
statuses = [client.get(path).status_code for path in sys.argv[1:]]
print(json.dumps({"statuses": statuses,
                  "loaded": sorted(m for m in {heavy} if m in sys.modules)}))
""".replace("{heavy}", repr(HEAVY))


def probe(*paths: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *paths],
        cwd=ROOT,
        # The test database, so that the pages the probe asks for can query it.
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.django_db(transaction=True)
def test_urls_and_annotator_pages_load_without_scipy_numba_or_pandas() -> None:
    result = probe("/accounts/login/", "/work/no-such-study/", "/")
    assert result["statuses"] == [200, 404, 302]
    assert result["loaded"] == []


def test_a_lazy_api_view_is_still_exempt_from_csrf_like_the_class_it_names(
    cast: Cast, db: None
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.researcher)
    response = client.get(reverse("leaderboard_api:study_list"))
    assert response.status_code == 200
    schema = client.get(reverse("leaderboard_api:schema"))
    assert schema.status_code == 200
    assert "/api/v1/studies/{slug}/report/" in schema.content.decode()
