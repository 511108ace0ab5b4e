"""A local stand-in for Prolific's API for Data Collectors, over real HTTP.

It speaks the endpoints Concord uses, with the paths, bodies and statuses of docs.prolific.com
(API reference, read 2026-12):
- GET  /api/v1/studies/{id}/                      the study object (status, places, reward)
- GET  /api/v1/studies/                           {"results": [...], "_links": ..., "meta": ...}:
                                                  every study of the token's workspace
- POST /api/v1/studies/                           create a draft: 201 with the study, status
                                                  UNPUBLISHED; the documented required fields
                                                  (name, description, external_study_url,
                                                  prolific_id_option, completion_codes with
                                                  code / code_type / actions, places, estimated
                                                  time, reward in cents) or 400 naming each.
                                                  NOT idempotent: every call makes another draft
- PATCH /api/v1/studies/{id}/                     update fields of a study (its URL, ...)
- POST /api/v1/studies/{id}/transition/           {"action": "PUBLISH" | "PAUSE" | "START" |
                                                  "STOP"}: UNPUBLISHED -> ACTIVE (publish),
                                                  ACTIVE -> PAUSED (pause), PAUSED -> ACTIVE
                                                  (start), ACTIVE or PAUSED -> AWAITING REVIEW
                                                  (stop); any other 400
- GET  /api/v1/submissions/?study={id}            {"results": [...], "_links": ..., "meta": ...}
- GET  /api/v1/submissions/{id}/                  one submission ("participant", "study_id", ...)
- POST /api/v1/submissions/{id}/transition/       {"action": "APPROVE" | "REJECT", "message",
                                                  "rejection_category"}; REJECT needs a message of
                                                  at least 100 characters and a category
- POST /api/v1/submissions/{id}/request-return/   {"request_return_reasons": [...]} (at least one):
                                                  Prolific messages the participant; the reply
                                                  carries "return_requested" (a time)
- POST /api/v1/submissions/bulk-approve/          {"submission_ids": [...]} or {"study_id",
                                                  "participant_ids": [...]}
- POST /api/v1/submissions/bonus-payments/        set up bonuses: {"study_id", "csv_bonuses":
                                                  "<participant_id>,<amount>\\n..."} -> 201 with
                                                  the bulk payment's id (nothing is paid yet)
- POST /api/v1/bulk-bonus-payments/{id}/pay/      pay them: 202; NOT idempotent, as Prolific warns:
                                                  every call pays the whole batch again
Every request must carry "Authorization: Token <token>"; another token gets 401. Prolific has no
bulk reject: rejections go one by one through the transition endpoint.

Every request is recorded (method, path, query, JSON body, the Authorization header), and faults
can be injected per path: "500", "503", "timeout" (sleeps past the client's deadline, then
answers), "drop" (closes the connection without a reply).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "prolific-test-token"
REJECTION_CATEGORIES = frozenset(
    {
        "TOO_QUICKLY",
        "TOO_SLOWLY",
        "FAILED_INSTRUCTIONS",
        "INCOMP_LONGITUDINAL",
        "FAILED_CHECK",
        "LOW_EFFORT",
        "MALINGERING",
        "NO_CODE",
        "BAD_CODE",
        "NO_DATA",
        "UNSUPP_DEVICE",
        "OTHER",
    }
)


def prolific_id() -> str:
    """A 24-hex-digit id, as Prolific's are."""
    return uuid.uuid4().hex[:24]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str


@dataclass
class Fault:
    """Fail `times` requests whose path starts with `path` (any, when empty) and whose method is
    `method` (any, when empty) as `kind`."""

    kind: str
    path: str = ""
    times: int = 1
    seconds: float = 3.0
    method: str = ""


@dataclass
class FakeProlific:
    token: str = TOKEN
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonus_batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Bulk payment id -> how many times it was paid (each pay call pays again).
    paid: dict[str, int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def study_add(self, *, study_id: str = "", places: int = 10, **fields: Any) -> dict[str, Any]:
        study_id = study_id or prolific_id()
        study = {
            "id": study_id,
            "name": fields.pop("name", "A Concord study"),
            "internal_name": fields.pop("internal_name", ""),
            "status": fields.pop("status", "ACTIVE"),
            "total_available_places": places,
            "places_taken": 0,
            "reward": fields.pop("reward", 160),
            "estimated_completion_time": fields.pop("estimated_completion_time", 8),
            "external_study_url": fields.pop("external_study_url", ""),
            "completion_codes": fields.pop("completion_codes", []),
            **fields,
        }
        with self.lock:
            self.studies[study_id] = study
        return study

    def submission_add(
        self, *, study_id: str, participant_id: str = "", status: str = "ACTIVE"
    ) -> dict[str, Any]:
        """A participant starts the study on Prolific: their submission (SESSION_ID) exists."""
        submission: dict[str, Any] = {
            "id": prolific_id(),
            "study_id": study_id,
            "participant_id": participant_id or prolific_id(),
            "status": status,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "completed_at": None,
            "entered_code": None,
            "bonus_payments": [],
            "return_requested": None,
        }
        with self.lock:
            self.submissions[submission["id"]] = submission
            self.studies[study_id]["places_taken"] += 1
        return submission

    def submission_set(self, submission_id: str, status: str) -> None:
        """What a participant does on Prolific: submit (AWAITING REVIEW), return (RETURNED)..."""
        with self.lock:
            self.submissions[submission_id]["status"] = status

    def inject(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def take_fault(self, path: str, method: str = "") -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and path.startswith(fault.path) and fault.method in ("", method):
                    fault.times -= 1
                    return fault
        return None

    def calls(self, method: str = "", path: str = "") -> list[Request]:
        """Recorded requests, optionally of one method and under one path."""
        with self.lock:
            return [
                r
                for r in self.requests
                if (not method or r.method == method) and r.path.startswith(path)
            ]

    def start(self) -> FakeProlific:
        fake = self

        class Handler(_Handler):
            state = fake

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _detail(submission: dict[str, Any]) -> dict[str, Any]:
    """A submission as "Retrieve a submission" gives it (the participant as `participant`)."""
    return {
        "id": submission["id"],
        "started_at": submission["started_at"],
        "status": submission["status"],
        "study_id": submission["study_id"],
        "completed_at": submission["completed_at"],
        "entered_code": submission["entered_code"],
        "participant": submission["participant_id"],
        "parent_study_id": None,
        "bonus_payments": submission["bonus_payments"],
        "return_requested": submission["return_requested"],
    }


def _listed(submission: dict[str, Any]) -> dict[str, Any]:
    """A submission as "List submissions" gives it (the participant as `participant_id`)."""
    return {
        "id": submission["id"],
        "participant_id": submission["participant_id"],
        "status": submission["status"],
        "started_at": submission["started_at"],
        "completed_at": submission["completed_at"],
        "study_code": submission["entered_code"],
    }


class _Handler(BaseHTTPRequestHandler):
    state: FakeProlific
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _error(self, status: int, title: str, detail: Any) -> None:
        self._send(status, {"error": {"status": status, "title": title, "detail": detail}})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._handle("POST")

    def do_PATCH(self) -> None:  # noqa: N802 - stdlib name
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        state = self.state
        with state.lock:
            state.requests.append(
                Request(
                    method=method,
                    path=url.path,
                    query=parse_qs(url.query),
                    body=body,
                    authorization=self.headers.get("Authorization", ""),
                )
            )
        fault = state.take_fault(url.path, method)
        if fault is not None:
            if fault.kind == "timeout":
                time.sleep(fault.seconds)
            elif fault.kind == "drop":
                self.close_connection = True
                self.connection.close()
                return
            else:
                self._error(int(fault.kind), "Server error", "Something went wrong.")
                return
        if self.headers.get("Authorization", "") != f"Token {state.token}":
            self._error(401, "Not authenticated", "Invalid token.")
            return
        parts = [part for part in url.path.split("/") if part]
        if parts[:2] != ["api", "v1"] or not url.path.endswith("/"):
            self._error(404, "Not found", "Not found.")
            return
        self._route(method, parts[2:], parse_qs(url.query), body if isinstance(body, dict) else {})

    def _route(  # noqa: C901 - the fake API's routing table
        self, method: str, parts: list[str], query: dict[str, list[str]], body: dict[str, Any]
    ) -> None:
        state = self.state
        with state.lock:
            if method == "GET" and parts == ["studies"]:
                results = list(state.studies.values())
                return self._send(
                    200,
                    {
                        "results": results,
                        "_links": {"next": {"href": None}, "previous": {"href": None}},
                        "meta": {"count": len(results)},
                    },
                )
            if method == "POST" and parts == ["studies"]:
                return self._study_create(body)
            if method in ("GET", "PATCH") and len(parts) == 2 and parts[0] == "studies":
                study = state.studies.get(parts[1])
                if study is None:
                    return self._error(404, "Not found", "Study not found.")
                if method == "PATCH":
                    study.update(body)
                return self._send(200, study)
            if method == "POST" and parts[:1] == ["studies"] and parts[2:] == ["transition"]:
                return self._study_transition(parts[1], body)
            if method == "GET" and parts == ["submissions"]:
                study_id = (query.get("study") or [""])[0]
                results = [
                    _listed(s)
                    for s in state.submissions.values()
                    if not study_id or s["study_id"] == study_id
                ]
                return self._send(
                    200,
                    {
                        "results": results,
                        "_links": {"next": {"href": None}, "previous": {"href": None}},
                        "meta": {"count": len(results)},
                    },
                )
            if method == "GET" and len(parts) == 2 and parts[0] == "submissions":
                submission = state.submissions.get(parts[1])
                if submission is None:
                    return self._error(404, "Not found", "Submission not found.")
                return self._send(200, _detail(submission))
            if method == "POST" and parts[:1] == ["submissions"] and parts[2:] == ["transition"]:
                return self._transition(parts[1], body)
            if (
                method == "POST"
                and parts[:1] == ["submissions"]
                and parts[2:] == ["request-return"]
            ):
                return self._request_return(parts[1], body)
            if method == "POST" and parts == ["submissions", "bulk-approve"]:
                return self._bulk_approve(body)
            if method == "POST" and parts == ["submissions", "bonus-payments"]:
                return self._bonus_setup(body)
            if method == "POST" and parts[:1] == ["bulk-bonus-payments"] and parts[2:] == ["pay"]:
                batch = state.bonus_batches.get(parts[1])
                if batch is None:
                    return self._error(404, "Not found", "Bulk bonus payment not found.")
                state.paid[parts[1]] = state.paid.get(parts[1], 0) + 1
                return self._send(
                    202,
                    f"Bulk bonus payment with ID {parts[1]} is being processed asynchronously. "
                    "Payments will be completed shortly.",
                )
        return self._error(404, "Not found", "Not found.")

    def _study_create(self, body: dict[str, Any]) -> None:
        problems: dict[str, list[str]] = {}
        for name in ("name", "description", "external_study_url"):
            if not isinstance(body.get(name), str) or not body[name].strip():
                problems[name] = ["This field is required."]
        if body.get("prolific_id_option") not in ("question", "url_parameters", "not_required"):
            problems["prolific_id_option"] = ["Not a valid choice."]
        for name in ("total_available_places", "estimated_completion_time", "reward"):
            value = body.get(name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 1:
                problems[name] = ["A positive number is required."]
        codes = body.get("completion_codes")
        if not isinstance(codes, list) or not codes:
            problems["completion_codes"] = ["Specify at least one completion code."]
        else:
            seen = [c.get("code") for c in codes if isinstance(c, dict)]
            shapes_ok = all(
                isinstance(c, dict)
                and isinstance(c.get("code"), str)
                and isinstance(c.get("code_type"), str)
                and isinstance(c.get("actions"), list)
                and all(isinstance(a, dict) and a.get("action") for a in c["actions"])
                for c in codes
            )
            if not shapes_ok or len(set(seen)) != len(codes):
                problems["completion_codes"] = ["Each code needs code, code_type and actions."]
        if problems:
            return self._error(400, "Bad request", problems)
        # The route holds the state's lock: the study goes in directly.
        study = {**body, "id": prolific_id(), "status": "UNPUBLISHED", "places_taken": 0}
        self.state.studies[study["id"]] = study
        return self._send(201, study)

    def _study_transition(self, study_id: str, body: dict[str, Any]) -> None:
        study = self.state.studies.get(study_id)
        if study is None:
            return self._error(404, "Not found", "Study not found.")
        action = str(body.get("action", ""))
        moves = {
            ("PUBLISH", "UNPUBLISHED"): "ACTIVE",
            ("PAUSE", "ACTIVE"): "PAUSED",
            ("START", "PAUSED"): "ACTIVE",
            ("STOP", "ACTIVE"): "AWAITING REVIEW",
            ("STOP", "PAUSED"): "AWAITING REVIEW",
        }
        if action not in ("PUBLISH", "PAUSE", "START", "STOP"):
            return self._error(400, "Bad request", {"action": ["Invalid action."]})
        new = moves.get((action, study["status"]))
        if new is None:
            return self._error(
                400, "Bad request", f"Cannot {action} a study in {study['status']} status."
            )
        study["status"] = new
        return self._send(200, study)

    def _transition(self, submission_id: str, body: dict[str, Any]) -> None:
        submission = self.state.submissions.get(submission_id)
        if submission is None:
            return self._error(404, "Not found", "Submission not found.")
        action = body.get("action")
        if action == "REJECT":
            if len(str(body.get("message", ""))) < 100:
                return self._error(400, "Bad request", {"message": ["At least 100 characters."]})
            if body.get("rejection_category") not in REJECTION_CATEGORIES:
                return self._error(400, "Bad request", {"rejection_category": ["Invalid."]})
        new = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(str(action))
        if new is None:
            return self._error(400, "Bad request", {"action": ["Invalid action."]})
        if submission["status"] == new:
            return self._send(200, _detail(submission))  # idempotent, as documented
        if submission["status"] != "AWAITING REVIEW":
            return self._error(
                400, "Bad request", f"Cannot transition a submission in {submission['status']}."
            )
        submission["status"] = new
        return self._send(200, _detail(submission))

    def _request_return(self, submission_id: str, body: dict[str, Any]) -> None:
        submission = self.state.submissions.get(submission_id)
        if submission is None:
            return self._error(404, "Not found", "Submission not found.")
        reasons = body.get("request_return_reasons")
        if not isinstance(reasons, list) or not reasons or not all(reasons):
            return self._error(
                400, "Bad request", {"request_return_reasons": ["Give at least one reason."]}
            )
        if submission["status"] not in ("ACTIVE", "AWAITING REVIEW"):
            return self._error(
                400, "Bad request", f"Cannot request a return of a {submission['status']} one."
            )
        submission["return_requested"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        return self._send(
            200,
            {
                "id": submission["id"],
                "status": submission["status"],
                "participant": submission["participant_id"],
                "return_requested": submission["return_requested"],
            },
        )

    def _bulk_approve(self, body: dict[str, Any]) -> None:
        state = self.state
        if "submission_ids" in body:
            chosen = [state.submissions.get(str(i)) for i in body["submission_ids"]]
        else:
            wanted = set(body.get("participant_ids") or [])
            chosen = [
                s
                for s in state.submissions.values()
                if s["study_id"] == body.get("study_id") and s["participant_id"] in wanted
            ]
        for submission in chosen:
            if submission is not None and submission["status"] == "AWAITING REVIEW":
                submission["status"] = "APPROVED"
        return self._send(200, "The request to bulk approve has been made successfully.")

    def _bonus_setup(self, body: dict[str, Any]) -> None:
        state = self.state
        study_id = str(body.get("study_id", ""))
        if study_id not in state.studies:
            return self._error(400, "Bad request", {"study_id": ["Study not found."]})
        taken = {
            s["participant_id"] for s in state.submissions.values() if s["study_id"] == study_id
        } | {s["id"] for s in state.submissions.values() if s["study_id"] == study_id}
        rows: list[tuple[str, Decimal]] = []
        for line in str(body.get("csv_bonuses", "")).splitlines():
            if not line.strip():
                continue
            who, _, amount = line.partition(",")
            if who not in taken:
                return self._error(400, "Bad request", {"csv_bonuses": [f"Unknown id {who}."]})
            rows.append((who, Decimal(amount)))
        batch_id = prolific_id()
        total = sum((amount for _, amount in rows), Decimal(0))
        state.bonus_batches[batch_id] = {"study": study_id, "rows": rows}
        # Amounts in the reply are in cents, as Prolific answers ("amount": 850 for 8.50).
        cents = int(total * 100)
        fees = cents // 3
        return self._send(
            201,
            {
                "id": batch_id,
                "study": study_id,
                "amount": cents,
                "fees": fees,
                "total_amount": cents + fees,
                "vat": 0,
            },
        )


def fake_serve(settings: Any, **study: Any) -> Iterator[FakeProlific]:
    """A test fixture's body: the fake started, Concord pointed at it, one study, then stopped."""
    server = FakeProlific().start()
    settings.PROLIFIC_API_BASE = server.base_url
    settings.PROLIFIC_API_TIMEOUT_SECONDS = 1.0
    server.study_add(**study)
    yield server
    server.stop()
