"""The database session engine, its read compiled once per process.

Django's `db` engine builds and compiles the same `Session.objects.get(...)` on every request
that reads a session; on this machine that compilation cost more Python time than PostgreSQL took
to answer. This engine keeps the same table, the same columns, the same expiry rule and the same
encoding (sessions made by either engine are read by the other); only the read is a
:class:`~core.db.prepared.PreparedSelect`.
"""

from __future__ import annotations

import logging

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.core.exceptions import SuspiciousOperation
from django.utils import timezone

from core.db.prepared import PreparedSelect

_SESSION: PreparedSelect[Session] = PreparedSelect(
    lambda key, now: Session.objects.filter(session_key=key, expire_date__gt=now)
)


class SessionStore(DatabaseSessionStore):
    """Django's database sessions; a key that is missing or expired reads as a new session."""

    def _get_session_from_db(self) -> Session | None:
        try:
            session = _SESSION.first(self.session_key, timezone.now())
        except SuspiciousOperation as exc:
            logging.getLogger(f"django.security.{exc.__class__.__name__}").warning(str(exc))
            session = None
        if session is None:
            self._session_key = None
        return session
