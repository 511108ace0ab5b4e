"""The staff-researcher case: the Django admin is for admins only, whatever the staff flag says."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import PASSWORD, Cast

ADMIN_PAGES = [
    "/admin/",
    "/admin/annotation/study/",
    "/admin/annotation/humanjudgment/",
    "/admin/annotation/worker/",
]


@pytest.mark.parametrize("url", ADMIN_PAGES)
def test_a_researcher_with_the_staff_flag_cannot_use_the_admin(cast: Cast, url: str) -> None:
    cast.researcher.is_staff = True
    cast.researcher.save()
    client = Client()
    assert client.login(username="rhea-researcher", password=PASSWORD)
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_staff_researcher_cannot_change_another_studys_data_through_the_admin(
    cast: Cast,
) -> None:
    cast.researcher.is_staff = True
    cast.researcher.save()
    client = Client()
    assert client.login(username="rhea-researcher", password=PASSWORD)
    url = f"/admin/annotation/study/{cast.other_study.pk}/change/"
    response = client.post(url, {"name": "taken over"})
    assert response.status_code == 302
    cast.other_study.refresh_from_db()
    assert cast.other_study.name == "Other study"


@pytest.mark.parametrize("url", ADMIN_PAGES)
def test_an_admin_uses_the_admin(cast: Cast, url: str) -> None:
    client = Client()
    assert client.login(username="ada-admin", password=PASSWORD)
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("who", ["wendy-worker", "otto-outsider"])
def test_workers_and_outsiders_with_a_staff_flag_cannot_use_the_admin(cast: Cast, who: str) -> None:
    from django.contrib.auth.models import User

    User.objects.filter(username=who).update(is_staff=True)
    client = Client()
    assert client.login(username=who, password=PASSWORD)
    assert client.get("/admin/").status_code == 302
