"""A study's report settings: the baseline of the length-controlled win rates and the PL price,
picked in the browser and used by the page, its downloads, the API and the exports, on the
style-control section's small study (base is in the most pairs)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from annotation.roles import Role
from leaderboard.models import ReportSettings
from leaderboard.selectors.settings import report_params_for
from leaderboard.services.reports import ReportParams, agreement_report_snapshot
from leaderboard.services.settings import report_settings_update
from tests.conftest import Cast, make_user
from tests.leaderboard.conftest import get_computed
from tests.leaderboard.test_style_control_section import World, style_world_build


@pytest.fixture
def world(cast: Cast) -> World:
    return style_world_build(cast)


def settings_url(world: World) -> str:
    return reverse("leaderboard:study_report_settings", args=[world.study.slug])


def report_json(client: Client, world: World) -> dict[str, Any]:
    url = reverse("leaderboard:study_analysis_report", args=[world.study.slug])
    return json.loads(get_computed(client, url).content)


def test_without_settings_the_baseline_is_the_system_in_the_most_pairs(
    world: World, client: Client, cast: Cast
) -> None:
    assert report_params_for(study=world.study) == ReportParams()
    client.force_login(cast.researcher)
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[world.study.slug]))
    assert "the system in the most pairs" in page.content.decode()
    section = report_json(client, world)["style_control"]
    assert (section["baseline"], section["baseline_source"]) == ("base", "most pairs")


def test_a_baseline_picked_in_the_browser_reaches_the_page_the_download_and_the_api(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    form = client.get(settings_url(world)).content.decode()
    for name in ("base", "long", "short"):
        assert f'<option value="{name}"' in form
    response = client.post(settings_url(world), {"baseline": "long", "pl_usd_per_1000": "0.25"})
    assert response.status_code == 302
    saved = ReportSettings.objects.get(study=world.study)
    assert (saved.baseline, saved.pl_usd_per_1000, saved.updated_by) == (
        "long",
        Decimal("0.2500"),
        cast.researcher,
    )
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[world.study.slug]))
    assert "Baseline of the length-controlled win rates: long" in page.content.decode()
    report = report_json(client, world)
    section = report["style_control"]
    assert (section["baseline"], section["baseline_source"]) == ("long", "parameter")
    parameters = report["metadata"]["parameters"]
    assert (parameters["baseline"], parameters["pl_usd_per_1000"]) == ("long", 0.25)
    api = get_computed(client, f"/api/v1/studies/{world.study.slug}/report/").json()
    assert api["style_control"]["baseline"] == "long"
    # Exports and the command line's default read the same settings.
    snapshot = agreement_report_snapshot(study=world.study)
    assert snapshot.payload is not None
    assert snapshot.payload["style_control"]["baseline"] == "long"


def test_a_changed_baseline_is_a_new_report_not_an_overwritten_one(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    before = agreement_report_snapshot(study=world.study)
    report_settings_update(
        study=world.study, user=cast.researcher, baseline="short", pl_usd_per_1000=Decimal(0)
    )
    after = agreement_report_snapshot(study=world.study)
    assert after.pk != before.pk and after.params_hash != before.params_hash
    assert after.payload is not None and after.payload["style_control"]["baseline"] == "short"


def test_a_baseline_that_is_not_a_system_of_the_study_or_a_negative_price_is_refused(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    response = client.post(settings_url(world), {"baseline": "gpt-9", "pl_usd_per_1000": "0"})
    assert response.status_code == 400
    assert "gpt-9" in response.content.decode()
    response = client.post(settings_url(world), {"baseline": "", "pl_usd_per_1000": "-1"})
    assert response.status_code == 400
    assert not ReportSettings.objects.filter(study=world.study).exists()
    with pytest.raises(ValidationError, match="not a system of the study 'main-study'"):
        report_settings_update(
            study=world.study, user=cast.researcher, baseline="gpt-9", pl_usd_per_1000=Decimal(0)
        )


@pytest.mark.parametrize("who", ["annotator", "outsider", "other researcher"])
def test_only_the_studys_researchers_see_or_change_its_settings(
    world: World, client: Client, cast: Cast, who: str
) -> None:
    user = {
        "annotator": lambda: cast.worker_one.user,
        "outsider": lambda: cast.outsider,
        "other researcher": lambda: make_user("rex-researcher", Role.RESEARCHER),
    }[who]()
    assert user is not None
    client.force_login(user)
    assert client.get(settings_url(world)).status_code == 404
    response = client.post(settings_url(world), {"baseline": "long", "pl_usd_per_1000": "1"})
    assert response.status_code == 404
    assert not ReportSettings.objects.filter(study=world.study).exists()
