"""Blindness: nothing an annotator can fetch names a system, shows other workers' answers, or
shows a prompt's reference answer (it is for reference-guided judges only)."""

from __future__ import annotations

import html
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.core.cache import cache
from django.test import Client

from annotation.models import Prompt, Study, System, Worker
from tests.annotation.work_helpers import enter_and_consent, make_pairs, prolific_url
from tests.conftest import Cast

SYSTEM_NAMES = ("Zyzzyva-Quokka-9000", "ünïcødé-Ωmega-bot", "<b>tagged-model</b>")
VERSION = "rev-SECRET-4471"
Response = Any  # what the test client returns
OTHER_REASON = "kumquat-reasoning-from-another-worker"
REFERENCE = "reference-answer-for-judges-only-7731"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def study(cast: Cast) -> Study:
    study = cast.study
    study.gold_share = Decimal("0.5")
    study.target_per_worker = 2
    study.overlap = 2
    study.form_values = True
    study.form_acceptability = True
    study.form_axes = True
    study.completion_code = "LEAK-CODE"
    study.save()
    make_pairs(study, 3, gold=2, systems=SYSTEM_NAMES[:2])
    System.objects.filter(study=study).update(version=VERSION)
    System.objects.create(study=study, name=SYSTEM_NAMES[2], version=VERSION)
    # Every prompt has a reference answer, and the study names every category as one that
    # judges see with it: still no worker's page may show it.
    prompts = Prompt.objects.filter(study=study)
    prompts.update(reference_turns=[REFERENCE], reference_source="imported")
    study.reference_categories = sorted(set(prompts.values_list("category", flat=True)))
    study.save()
    return study


def secrets_in(text: str) -> list[str]:
    found = []
    lowered = text.lower()
    for secret in (*SYSTEM_NAMES, VERSION, OTHER_REASON, REFERENCE):
        for form in {secret, html.escape(secret), html.escape(secret, quote=False)}:
            if form.lower() in lowered:
                found.append(secret)
    return found


def everything_in(response: Response) -> str:
    headers = "\n".join(f"{key}: {value}" for key, value in response.items())
    cookies = "\n".join(str(morsel) for morsel in response.cookies.values())
    body = response.content
    return f"{response.status_code}\n{headers}\n{cookies}\n{body.decode('utf-8', 'replace')}"


def full_item(study: Study) -> dict[str, object]:
    return {
        "submission_id": str(uuid.uuid4()),
        "likert": "2",
        "values": ["clarity"],
        "acceptability_left": "accept",
        "acceptability_right": "unsure",
        **{f"axes_{side}_{axis}": "yes" for side in ("left", "right")
           for axis in ("relevance", "usefulness", "factuality")},
    }  # fmt: skip


def test_no_annotator_facing_response_names_a_system_or_shows_others_answers(
    study: Study,
) -> None:
    other, me = Client(), Client()
    # Another worker answers first, with a distinctive reason.
    enter_and_consent(other, study, "PID-OTHER")
    item = other.post(f"/work/{study.slug}/api/next/").json()["item"]
    other.post(
        f"/work/{study.slug}/api/items/{item['id']}/submit/",
        {**full_item(study), "reason": OTHER_REASON, "likert": 2, "values": ["clarity"]},
        content_type="application/json",
    )
    other_item = other.post(f"/work/{study.slug}/api/next/").json()["item"]

    seen: list[tuple[str, Response]] = []

    def fetch(method: str, url: str, **kwargs: object) -> Response:
        response = getattr(me, method)(url, **kwargs)
        seen.append((f"{method.upper()} {url}", response))
        return response

    base = f"/work/{study.slug}"
    fetch("get", prolific_url(study, "PID-ME"))
    fetch("get", f"{base}/consent/")
    fetch("post", f"{base}/consent/", data={"agree": "yes"})
    for _ in range(study.target_per_worker):
        location = fetch("get", f"{base}/")["Location"]
        fetch("get", location)
        fetch("get", f"{base}/pause/")
        fetch("post", location, data={"submission_id": str(uuid.uuid4()), "likert": "11"})
        fetch("post", location, data=full_item(study))
    fetch("get", f"{base}/", follow=True)
    fetch("get", f"{base}/done/")
    fetch("get", f"{base}/item/{other_item['id']}/")
    fetch("get", f"{base}/item/{uuid.uuid4()}/")
    fetch("post", f"{base}/api/next/")
    fetch("get", f"{base}/api/progress/")
    fetch("post", f"{base}/api/items/{other_item['id']}/submit/", data={"likert": 1})
    fetch(
        "post",
        f"{base}/api/items/{other_item['id']}/submit/",
        data={"submission_id": str(uuid.uuid4()), "likert": 1},
        content_type="application/json",
    )
    fetch("get", f"{base}/no-such-page/")
    fetch("get", prolific_url(study, "PID-ME", session="S2"))
    # A worker who arrives with nothing left, and a blocked worker.
    late = Client()
    enter_and_consent(late, study, "PID-LATE")
    Worker.objects.filter(external_id="PID-LATE").update(state=Worker.State.BLOCKED)
    seen.append(("GET blocked", late.get(f"{base}/")))
    seen.append(("POST blocked api", late.post(f"{base}/api/next/")))

    assert len(seen) > 20
    assert any(r.status_code == 200 and b"Left answer" in r.content for _, r in seen)
    assert {404, 403, 400}.issubset({r.status_code for _, r in seen})
    leaks = {label: secrets_in(everything_in(r)) for label, r in seen}
    assert {label: found for label, found in leaks.items() if found} == {}


def test_static_files_for_workers_name_no_system() -> None:
    for name in ("annotation/work.js", "annotation/work.css", "concord.css"):
        path = finders.find(name)
        assert isinstance(path, str)
        assert secrets_in(Path(path).read_text()) == []
