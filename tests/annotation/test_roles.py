"""Who may read which study: admins all, researchers their own, nobody else any."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.selectors.studies import study_list_for_user
from tests.conftest import PASSWORD, Cast


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_admin_sees_every_study(cast: Cast) -> None:
    assert set(study_list_for_user(user=cast.admin)) == {cast.study, cast.other_study}


def test_researcher_sees_only_studies_they_are_a_member_of(cast: Cast) -> None:
    assert list(study_list_for_user(user=cast.researcher)) == [cast.study]
    client = client_for(cast.researcher)
    assert client.get(f"/studies/{cast.study.slug}/").status_code == 200
    assert client.get(f"/studies/{cast.other_study.slug}/").status_code == 404


def test_annotators_and_outsiders_see_no_study(cast: Cast) -> None:
    worker_user = cast.worker_one.user
    assert isinstance(worker_user, User)
    for user in (worker_user, cast.outsider):
        assert not study_list_for_user(user=user).exists()
        client = client_for(user)
        assert client.get("/studies/").status_code == 404
        assert client.get(f"/studies/{cast.study.slug}/").status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(cast: Cast) -> None:
    response = Client().get(f"/studies/{cast.study.slug}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("role", ["admin", "researcher", "staff researcher"])
def test_only_admins_reach_the_django_admin(cast: Cast, role: str) -> None:
    user = cast.admin if role == "admin" else cast.researcher
    if role == "staff researcher":  # the admin does not filter by membership: never let in
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    response = client_for(user).get("/admin/")
    assert response.status_code == (200 if role == "admin" else 302)


def test_researcher_role_creates_and_configures_studies_but_deletes_nothing(cast: Cast) -> None:
    # Configuring is checked against membership on each page (tests/annotation/test_study_setup).
    researcher = User.objects.get(pk=cast.researcher.pk)
    assert researcher.has_perm("annotation.import_study")
    assert researcher.has_perm("annotation.export_study")
    assert researcher.has_perm("annotation.add_study")
    assert researcher.has_perm("annotation.change_study")
    assert not researcher.has_perm("annotation.delete_study")
    assert not researcher.has_perm("annotation.delete_pair")
    worker_user = User.objects.get(worker_profiles=cast.worker_one)
    assert not worker_user.has_perm("annotation.view_study")
