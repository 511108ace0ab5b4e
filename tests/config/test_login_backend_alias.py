"""Moving the log-in backend from config/ to core/ logs nobody out: a session stored under the
old backend path still reads its user, and the old path logs nobody in (config/auth.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    authenticate,
)
from django.contrib.auth.models import User
from django.test import Client

from config.auth import AccountBackend as OldPathBackend
from core.sessions import SessionStore


def _client_with_session(user: User, backend: str) -> Client:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = backend
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = str(session.session_key)
    return client


def test_a_session_stored_before_the_move_stays_logged_in(db: None) -> None:
    user = User.objects.create_user("old-session", password="pw-123456789")
    for backend in ("config.auth.AccountBackend", "core.auth.AccountBackend"):
        response = _client_with_session(user, backend).get("/")
        assert response.wsgi_request.user == user, backend


def test_a_session_naming_an_unknown_backend_is_logged_out(db: None) -> None:
    user = User.objects.create_user("odd-session", password="pw-123456789")
    response = _client_with_session(user, "config.nothing.Backend").get("/")
    assert not response.wsgi_request.user.is_authenticated


def test_a_password_log_in_goes_through_core_and_the_old_path_never_logs_in(db: None) -> None:
    user = User.objects.create_user("new-login", password="pw-123456789")
    old = OldPathBackend()
    assert old.authenticate(None, username="new-login", password="pw-123456789") is None
    found = authenticate(None, username="new-login", password="pw-123456789")
    assert found == user
    assert getattr(found, "backend", None) == "core.auth.AccountBackend"
