"""A small client of Prolific's API for Data Collectors (docs.prolific.com): httpx, deadlines,
the deployment's base URL (PROLIFIC_API_BASE) on an allow-list of hosts.

Only what Concord uses: a study (read, list, create as a draft, transition: publish, pause,
start, stop), its submissions, one submission, their transitions (approve,
reject, bulk approve, request a return) and bonus payments. Errors fall in three kinds a
caller can act on: the token was refused (401/403: ask the researcher for a new one), the thing
asked for does not exist (404), or Prolific could not answer (timeouts, refused connections,
429, 5xx: degrade, try later). The token goes in the Authorization header and nowhere else: no
message, log line or exception here contains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from core.errors import ApplicationError


class ProlificError(ApplicationError):
    """A failed call; `message` is fit for a researcher's page (it never holds the token)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class ProlificTokenRefused(ProlificError):
    """Prolific refused the token (401 or 403)."""


class ProlificNotFound(ProlificError):
    """No such study or submission for this token (404)."""


class ProlificUnavailable(ProlificError):
    """Prolific did not answer in time, or answered 429 or 5xx: nothing is known."""

    http_status = 503


class ProlificNotAllowed(ProlificError):
    """PROLIFIC_API_BASE names a host that is not on CONCORD_PROLIFIC_HOST_ALLOWLIST."""


@dataclass(frozen=True)
class ProlificStudy:
    id: str
    name: str
    status: str
    places: int
    places_taken: int
    internal_name: str = ""


@dataclass(frozen=True)
class ProlificSubmission:
    id: str
    study_id: str
    participant_id: str
    status: str


# Prolific's rejection categories (the transition endpoint's `rejection_category`), with the
# words its own review page uses for them.
REJECTION_CATEGORIES: dict[str, str] = {
    "TOO_QUICKLY": "Completed too quickly",
    "TOO_SLOWLY": "Completed too slowly",
    "FAILED_INSTRUCTIONS": "Did not follow the instructions",
    "INCOMP_LONGITUDINAL": "Did not complete a longitudinal study",
    "FAILED_CHECK": "Failed attention or gold checks",
    "LOW_EFFORT": "Low effort",
    "MALINGERING": "Malingering",
    "NO_CODE": "No completion code",
    "BAD_CODE": "Wrong completion code",
    "NO_DATA": "No data",
    "UNSUPP_DEVICE": "Unsupported device",
    "OTHER": "Other",
}
# Prolific refuses a rejection whose message to the participant is shorter than this.
REJECTION_MESSAGE_MIN = 100
# The reasons Prolific's own page offers when asking a participant to return a submission
# (the request-return endpoint takes free text; these are its words).
RETURN_REASONS: tuple[str, ...] = (
    "Didn't finish the study",
    "Encountered technical problems",
    "Withdrew consent",
)
# Prolific's documented advice: at most 1,000 submissions per bulk-approve request.
BULK_APPROVE_MAX = 1000


def _error_detail(response: httpx.Response) -> str:
    """Prolific's own words for a refusal ({"error": {"detail": ...}}), short and on one line."""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    detail: Any = error.get("detail") if isinstance(error, dict) else None
    if isinstance(detail, dict):
        detail = "; ".join(
            f"{key}: {' '.join(map(str, value)) if isinstance(value, list) else value}"
            for key, value in detail.items()
        )
    elif isinstance(detail, list):
        detail = " ".join(map(str, detail))
    return " ".join(str(detail or "").split())[:300]


def api_base() -> str:
    """The configured base URL, checked against the allow-list (host, host:port or host:*)."""
    base = settings.PROLIFIC_API_BASE.rstrip("/")
    parts = urlsplit(base)
    host = (parts.hostname or "").lower()
    port = parts.port
    allowed = {entry.lower() for entry in settings.CONCORD_PROLIFIC_HOST_ALLOWLIST}
    ok = (port is None and host in allowed) or f"{host}:{port}" in allowed or f"{host}:*" in allowed
    if parts.scheme not in ("https", "http") or not ok:
        raise ProlificNotAllowed(
            f"PROLIFIC_API_BASE's host {host!r} is not on CONCORD_PROLIFIC_HOST_ALLOWLIST."
        )
    if parts.scheme == "http" and host not in ("127.0.0.1", "localhost"):
        raise ProlificNotAllowed("PROLIFIC_API_BASE must use https.")
    return base


def _study(body: Any) -> ProlificStudy:
    """A study from "Retrieve a study", the studies list, a create or a transition's reply."""
    body = body if isinstance(body, dict) else {}
    return ProlificStudy(
        id=str(body.get("id", "")),
        name=str(body.get("name", "")),
        status=str(body.get("status", "")),
        places=int(body.get("total_available_places") or 0),
        places_taken=int(body.get("places_taken") or 0),
        internal_name=str(body.get("internal_name") or ""),
    )


def _submission(body: Any) -> ProlificSubmission:
    """A submission from "Retrieve a submission" or a transition's reply."""
    body = body if isinstance(body, dict) else {}
    return ProlificSubmission(
        id=str(body.get("id", "")),
        study_id=str(body.get("study_id", "")),
        participant_id=str(body.get("participant") or body.get("participant_id") or ""),
        status=str(body.get("status", "")),
    )


class ProlificClient:
    """One study's connection: its token, the deployment's base URL and deadline."""

    def __init__(self, *, token: str, timeout: float | None = None) -> None:
        self._token = token
        seconds = settings.PROLIFIC_API_TIMEOUT_SECONDS if timeout is None else timeout
        self._timeout = httpx.Timeout(seconds)

    def __repr__(self) -> str:  # never the token
        return "ProlificClient()"

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = api_base() + path
        headers = {"Authorization": f"Token {self._token}", "Accept": "application/json"}
        try:
            with httpx.Client(timeout=self._timeout, follow_redirects=False) as client:
                response = client.request(method, url, headers=headers, **kwargs)
        except httpx.TimeoutException as exc:
            raise ProlificUnavailable("Prolific did not answer in time.") from exc
        except httpx.HTTPError as exc:
            raise ProlificUnavailable(
                f"Prolific could not be reached ({type(exc).__name__})."
            ) from exc
        status = response.status_code
        if status in (401, 403):
            raise ProlificTokenRefused(
                f"Prolific refused the API token ({status}). Paste the whole token again, from "
                "Prolific's Settings -> API tokens, and check it was not deleted there.",
                status=status,
            )
        if status == 404:
            raise ProlificNotFound("Prolific has no such item for this token (404).", status=404)
        if status == 429 or status >= 500:
            detail = _error_detail(response)
            raise ProlificUnavailable(
                f"Prolific answered {status}; try again later."
                + (f" Prolific said: {detail}" if detail else ""),
                status=status,
            )
        if status >= 300:
            detail = _error_detail(response)
            raise ProlificError(
                f"Prolific refused the request ({status}){': ' + detail if detail else ''}.",
                status=status,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ProlificUnavailable("Prolific's reply was not JSON.", status=status) from exc

    def study_get(self, study_id: str) -> ProlificStudy:
        """GET /api/v1/studies/{id}/."""
        return _study(self._call("GET", f"/api/v1/studies/{study_id}/"))

    def studies_list(self) -> list[ProlificStudy]:
        """GET /api/v1/studies/: every study of the token's workspace, every page."""
        out: list[ProlificStudy] = []
        page = 1
        while True:
            body = self._call("GET", "/api/v1/studies/", params={"page": page})
            rows = body.get("results", []) if isinstance(body, dict) else []
            out.extend(_study(row) for row in rows)
            following = ((body.get("_links") or {}).get("next") or {}).get("href")
            if not following or not rows:
                return out
            page += 1

    def study_create(self, payload: dict[str, Any]) -> ProlificStudy:
        """POST /api/v1/studies/: a draft (UNPUBLISHED) study. NOT idempotent: every call makes
        another draft, so the caller looks up its internal_name first."""
        found = _study(self._call("POST", "/api/v1/studies/", json=payload))
        if not found.id:
            raise ProlificUnavailable("Prolific's reply to the study creation had no id.")
        return found

    def study_update(self, study_id: str, fields: dict[str, Any]) -> ProlificStudy:
        """PATCH /api/v1/studies/{id}/ with the fields to change (idempotent)."""
        return _study(self._call("PATCH", f"/api/v1/studies/{study_id}/", json=fields))

    def study_transition(self, study_id: str, *, action: str) -> ProlificStudy:
        """POST /api/v1/studies/{id}/transition/ with PUBLISH, PAUSE, START or STOP."""
        return _study(
            self._call("POST", f"/api/v1/studies/{study_id}/transition/", json={"action": action})
        )

    def submission_get(self, submission_id: str) -> ProlificSubmission:
        """GET /api/v1/submissions/{id}/ (the id is the participant's SESSION_ID)."""
        return _submission(self._call("GET", f"/api/v1/submissions/{submission_id}/"))

    def submission_transition(
        self, submission_id: str, *, action: str, message: str = "", rejection_category: str = ""
    ) -> ProlificSubmission:
        """POST /api/v1/submissions/{id}/transition/: APPROVE, or REJECT with a category and a
        message of at least 100 characters. Idempotent on Prolific's side."""
        payload: dict[str, str] = {"action": action}
        if action == "REJECT":
            payload |= {"message": message, "rejection_category": rejection_category}
        return _submission(
            self._call("POST", f"/api/v1/submissions/{submission_id}/transition/", json=payload)
        )

    def submissions_bulk_approve(self, submission_ids: list[str]) -> None:
        """POST /api/v1/submissions/bulk-approve/ with submission ids (Prolific's advice)."""
        if len(submission_ids) > BULK_APPROVE_MAX:
            raise ValueError(f"At most {BULK_APPROVE_MAX} submissions per bulk approve.")
        self._call(
            "POST", "/api/v1/submissions/bulk-approve/", json={"submission_ids": submission_ids}
        )

    def submission_request_return(
        self, submission_id: str, *, reasons: list[str]
    ) -> ProlificSubmission:
        """POST /api/v1/submissions/{id}/request-return/: Prolific messages the participant
        asking them to return it (a researcher cannot return a submission themselves)."""
        return _submission(
            self._call(
                "POST",
                f"/api/v1/submissions/{submission_id}/request-return/",
                json={"request_return_reasons": reasons},
            )
        )

    def submissions_list(self, study_id: str) -> list[ProlificSubmission]:
        """GET /api/v1/submissions/?study={id}, every page."""
        out: list[ProlificSubmission] = []
        page = 1
        while True:
            body = self._call(
                "GET", "/api/v1/submissions/", params={"study": study_id, "page": page}
            )
            for row in body.get("results", []):
                out.append(
                    ProlificSubmission(
                        id=str(row.get("id", "")),
                        study_id=study_id,
                        participant_id=str(row.get("participant_id", "")),
                        status=str(row.get("status", "")),
                    )
                )
            following = ((body.get("_links") or {}).get("next") or {}).get("href")
            if not following or not body.get("results"):
                return out
            page += 1

    def bonus_setup(self, *, study_id: str, csv_bonuses: str) -> str:
        """POST /api/v1/submissions/bonus-payments/: set up (not pay) bonuses; the batch id."""
        body = self._call(
            "POST",
            "/api/v1/submissions/bonus-payments/",
            json={"study_id": study_id, "csv_bonuses": csv_bonuses},
        )
        batch_id = str((body or {}).get("id", ""))
        if not batch_id:
            raise ProlificUnavailable("Prolific's reply to the bonus set-up had no id.")
        return batch_id

    def bonus_pay(self, batch_id: str) -> None:
        """POST /api/v1/bulk-bonus-payments/{id}/pay/. NOT idempotent: call once per batch."""
        self._call("POST", f"/api/v1/bulk-bonus-payments/{batch_id}/pay/", json={})
