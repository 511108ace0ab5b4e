"""Errors the annotation flow raises with a message meant for the worker.

Messages never name a system, another worker or a judge: they are shown to annotators as is.
"""

from __future__ import annotations

from core.errors import ApplicationError


class AnnotationError(ApplicationError):
    """A refusal the worker should read; `code` is stable for the JSON API."""

    code = "refused"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StudyNotOpen(AnnotationError):
    http_status = 409
    code = "study_not_open"


class WorkerBlocked(AnnotationError):
    code = "worker_blocked"


class WorkerExcluded(AnnotationError):
    """A refused change to an excluded participant (for researchers, not workers)."""

    code = "worker_excluded"


class AssignmentNotFound(AnnotationError):
    http_status = 404
    code = "not_found"


class AssignmentExpired(AnnotationError):
    http_status = 409
    code = "expired"


class AssignmentClosed(AnnotationError):
    http_status = 409
    code = "closed"


class JudgmentInvalid(AnnotationError):
    """The submitted form breaks a rule; `field` names the offending input."""

    code = "invalid"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class EntryRefused(AnnotationError):
    code = "entry_refused"


class EntryRateLimited(EntryRefused):
    http_status = 429
    code = "rate_limited"
