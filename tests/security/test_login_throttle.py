"""Password log-ins are throttled: many wrong passwords, then the right one does not log in."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import PASSWORD, Cast


def attempt(client: Client, url: str, username: str, password: str) -> int:
    response = client.post(url, {"username": username, "password": password})
    return response.status_code


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize(
    ("url", "username"), [("/accounts/login/", "rhea-researcher"), ("/admin/login/", "ada-admin")]
)
def test_forty_wrong_passwords_lock_the_account_from_that_address(
    cast: Cast, url: str, username: str, settings
) -> None:
    client = Client(REMOTE_ADDR="203.0.113.7")
    statuses = [attempt(client, url, username, f"wrong-{i}") for i in range(40)]
    assert statuses[: settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)
    assert statuses[-1] == 429
    assert attempt(client, url, username, PASSWORD) == 429
    assert not signed_in(client)


def test_a_lockout_from_one_address_does_not_lock_the_user_out_elsewhere(
    cast: Cast, settings
) -> None:
    attacker = Client(REMOTE_ADDR="203.0.113.7")
    for i in range(settings.AXES_FAILURE_LIMIT + 2):
        attempt(attacker, "/accounts/login/", "rhea-researcher", f"wrong-{i}")
    owner = Client(REMOTE_ADDR="198.51.100.20")
    assert attempt(owner, "/accounts/login/", "rhea-researcher", PASSWORD) == 302
    assert signed_in(owner)


def test_a_few_typos_then_the_right_password_log_in(cast: Cast, settings) -> None:
    client = Client(REMOTE_ADDR="203.0.113.8")
    for i in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(client, "/accounts/login/", "rhea-researcher", f"typo-{i}") == 200
    assert attempt(client, "/accounts/login/", "rhea-researcher", PASSWORD) == 302
    assert signed_in(client)
