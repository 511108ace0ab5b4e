"""The one base of every error Concord raises on purpose: :class:`ApplicationError`.

An application error says what is wrong and where, in words fit for the person who caused it
(a worker, a researcher, an admin): "line 4: 'score' must be 1-8", not a traceback. A service
raises it; a door that expects it catches it and answers as it always has (a form error, a
message, its own JSON). One that reaches no handler is answered once for every page and once
for every API (core/errorhandlers.py): the page shows the message with the site's template, the
API returns `{"detail": message, "code": code}` (and `field` when there is one), with the class's
`http_status` (400 unless the class says the request conflicts with the state, 409, or the like).

This module imports nothing, so the pure layers (`leaderboard.stats`, `rankeval`) may derive
from it too.
"""

from __future__ import annotations


class ApplicationError(Exception):
    """An error with a message meant for a person; `code` is stable for the API, `field` names
    the offending input when there is one, `http_status` is the answer when no door catches it.
    """

    code: str = "invalid"
    http_status: int = 400
    field: str | None = None

    def __init__(self, *args: object, field: str | None = None, code: str | None = None) -> None:
        super().__init__(*args)
        self.message = str(args[0]) if args else ""
        if field is not None:
            self.field = field
        if code is not None:
            self.code = code
        elif getattr(self, "code", None) is None:
            # A second base may have set it to None (Django's ValidationError does).
            self.code = type(self).code
