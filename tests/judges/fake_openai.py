"""A local stand-in for the OpenAI chat completions API, over real HTTP.

It answers POST /v1/chat/completions with the real response shape, using recorded replies from
fixtures/judge_replies/, and can inject 429 with Retry-After, 500, slow replies, garbage bodies,
redirects and refusals. It identifies the (pair, order) of a request by markers that the test
data puts in the answers ("(ref p3-A)" in answer A, "(ref p3-B)" in answer B): the marker met
first tells which answer was shown first. Every request is logged with its time, so tests can
count calls per (pair, order) and requests per window, whichever process made them.

Like some API gateways it honours an Idempotency-Key header: a request that repeats the key of
one already answered gets the stored reply and is logged as a replay, not a new generation. With
`honour_idempotency=False` it ignores the header, as OpenAI does, so a request sent twice is
generated, and paid, twice: the fault suite counts exactly that.

Each record keeps the request's call (its Idempotency-Key), when it arrived and when its reply
was finished or abandoned by the client, and the Retry-After a 429 announced.

Run it alone with `python -m tests.judges.fake_openai --port 8099 --delay 0.2`.
"""

from __future__ import annotations

import argparse
import json
import re
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPLIES_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "judge_replies"
MARKER = re.compile(r"\(ref ([\w.:-]+?)-([AB])\)")
API_KEY = "sk-test-fake-key"


def load_reply(name: str) -> dict[str, Any]:
    """A recorded reply by file name (without .json)."""
    return json.loads((REPLIES_DIR / f"{name}.json").read_text())


def call_key(text: str) -> str:
    """'<ref>:ab' when answer A's marker comes first, '<ref>:ba' when B's does."""
    match = MARKER.search(text)
    if match is None:
        return "unmarked"
    return f"{match.group(1)}:{'ab' if match.group(2) == 'A' else 'ba'}"


@dataclass
class Fault:
    """An injected failure: applies to requests whose key matches (None: any), `times` times.

    kind: "429" (with Retry-After), "500", "slow" (sleeps `seconds`, then answers), "trickle"
    (sends the reply one byte at a time over `seconds`), "garbage" (a 200 whose body is not
    JSON), "truncated" (a 200 whose JSON body stops half-way), "redirect" (a 307 to another
    host), "reply" (answers with the recorded reply `reply`), "hook" (calls `hook` before
    answering normally).
    """

    kind: str
    key: str | None = None
    times: int = 1
    retry_after: float | None = None
    seconds: float = 0.0
    reply: str = ""
    location: str = "http://169.254.169.254/latest/meta-data/"
    hook: Callable[[], object] | None = None


@dataclass
class Record:
    key: str
    at: float
    status: int
    replay: bool
    generated: bool
    call: str = ""
    started: float = 0.0
    retry_after: float | None = None
    aborted: bool = False


@dataclass
class FakeOpenAI:
    """The server's behaviour and its log; shared by the handler threads under one lock."""

    default_reply: str = "likert_first_better"
    replies: dict[str, str] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    delay: float = 0.0
    api_key: str = API_KEY
    honour_idempotency: bool = True
    # What names a request in `replies` and the log, from its messages' text (a multi-turn test
    # names a request by the markers of its judged turn's answers alone).
    key_from: Callable[[str], str] = call_key
    log_path: Path | None = None
    records: list[Record] = field(default_factory=list)
    cache: dict[str, bytes] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: _Server | None = None
    # Stalls of this process (time, seconds): moments when a thread that asked for 10 ms of
    # sleep got the CPU back much later; a reply's timing is only as good as the server's.
    stalls: list[tuple[float, float]] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def inject(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def take_fault(self, key: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and (fault.key is None or fault.key == key):
                    fault.times -= 1
                    return fault
        return None

    def record(
        self,
        key: str,
        status: int,
        *,
        replay: bool = False,
        call: str = "",
        started: float | None = None,
        retry_after: float | None = None,
        aborted: bool = False,
    ) -> None:
        """Log one request. A 200 that was not a replay counts as generated, and so paid,
        even when the client hung up before the reply was finished (the API bills it)."""
        now = time.time()
        entry = Record(
            key=key,
            at=now,
            status=status,
            replay=replay,
            generated=status == 200 and not replay,
            call=call,
            started=now if started is None else started,
            retry_after=retry_after,
            aborted=aborted,
        )
        with self.lock:
            self.records.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a") as log:
                    log.write(json.dumps(entry.__dict__) + "\n")

    def stall_during(self, start: float, end: float) -> float:
        """The longest stall of this process between `start` and `end` (time.time())."""
        with self.lock:
            return max(
                (seconds for at, seconds in self.stalls if start <= at and at - seconds <= end),
                default=0.0,
            )

    def _watch_stalls(self) -> None:
        while not self.stopped.is_set():
            before = time.monotonic()
            time.sleep(0.01)
            stall = time.monotonic() - before - 0.01
            if stall > 0.05:
                with self.lock:
                    self.stalls.append((time.time(), stall))

    def snapshot(self) -> list[Record]:
        with self.lock:
            return list(self.records)

    def generations(self) -> Counter[str]:
        """Replies generated (and so paid for) per (pair, order) key."""
        with self.lock:
            return Counter(record.key for record in self.records if record.generated)

    def requests(self) -> Counter[str]:
        """Every request per key, whatever its outcome."""
        with self.lock:
            return Counter(record.key for record in self.records)

    def times(self) -> list[float]:
        with self.lock:
            return sorted(record.at for record in self.records)

    def start(self, port: int = 0) -> FakeOpenAI:
        fake = self

        class Handler(_Handler):
            state = fake

        self.server = _Server(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        threading.Thread(target=self._watch_stalls, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _Server(ThreadingHTTPServer):
    # A real API's listen backlog, not socketserver's 5: with a hundred clients connecting at
    # once, a full backlog reset connections after their request was sent (a reply lost, and
    # paid for again), which no API server does.
    request_queue_size = 1024


class _Handler(BaseHTTPRequestHandler):
    state: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            # The client is gone (killed, or past its deadline); the reply was made all the same.
            self.close_connection = True

    def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None):
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._send(status, json.dumps(body).encode(), headers)

    def _client_left_within(self, seconds: float) -> bool:
        """Wait `seconds`; True as soon as the client closes its side (it gave up)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return True
        return False

    def do_POST(self) -> None:  # noqa: N802, C901 - stdlib naming; one route, a branch per behaviour
        length = int(self.headers.get("Content-Length", "0"))
        payload = json.loads(self.rfile.read(length) or b"{}")
        state = self.state
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        if self.headers.get("Authorization") != f"Bearer {state.api_key}":
            state.record("unauthorised", 401)
            self._error(401, "Incorrect API key provided.", "invalid_request_error")
            return
        text = "\n".join(str(message.get("content", "")) for message in payload["messages"])
        key = state.key_from(text)
        idempotency = self.headers.get("Idempotency-Key", "")
        started = time.time()
        with state.lock:
            cached = (
                state.cache.get(idempotency) if idempotency and state.honour_idempotency else None
            )
        if cached is not None:
            state.record(key, 200, replay=True, call=idempotency, started=started)
            self._send(200, cached)
            return
        fault = state.take_fault(key)
        if state.delay:
            time.sleep(state.delay)
        reply_name = state.replies.get(key, state.default_reply)
        trickle = 0.0
        if fault is not None:
            if fault.kind == "429":
                state.record(
                    key, 429, retry_after=fault.retry_after, call=idempotency, started=started
                )
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = f"{fault.retry_after:g}"
                self._error(429, "Rate limit reached for requests.", "requests", headers)
                return
            if fault.kind == "500":
                state.record(key, 500, call=idempotency, started=started)
                self._error(500, "The server had an error processing your request.", "server_error")
                return
            if fault.kind in ("garbage", "truncated"):
                state.record(key, 299, call=idempotency, started=started)
                body = b"<html><body>502 Bad Gateway</body></html>"
                if fault.kind == "truncated":
                    body = json.dumps(load_reply(reply_name)).encode()[:60]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if fault.kind == "redirect":
                state.record(key, 307, call=idempotency, started=started)
                self._send(307, b"{}", {"Location": fault.location})
                return
            if fault.kind == "slow" and self._client_left_within(fault.seconds):
                # Generated, and billed, though nobody is left to read it.
                state.record(key, 200, aborted=True, call=idempotency, started=started)
                self.close_connection = True
                return
            if fault.kind == "trickle":
                trickle = fault.seconds
            if fault.kind == "hook" and fault.hook is not None:
                fault.hook()
            if fault.kind == "reply":
                reply_name = fault.reply
        reply = load_reply(reply_name)
        reply["model"] = payload.get("model") or reply["model"]
        reply["usage"]["prompt_tokens"] = max(1, len(text) // 4)
        reply["usage"]["total_tokens"] = (
            reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
        )
        raw = json.dumps(reply).encode()
        with state.lock:
            if idempotency:
                state.cache[idempotency] = raw
        if not trickle:
            state.record(key, 200, call=idempotency, started=started)
            self._send(200, raw)
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.flush()
            for index in range(len(raw)):
                self.wfile.write(raw[index : index + 1])
                self.wfile.flush()
                time.sleep(trickle / len(raw))
        except OSError:
            # The client gave up (its deadline): the reply was generated and is billed anyway.
            state.record(key, 200, aborted=True, call=idempotency, started=started)
            self.close_connection = True
            return
        state.record(key, 200, call=idempotency, started=started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args()
    fake = FakeOpenAI(delay=args.delay, log_path=args.log).start(args.port)
    print(f"fake OpenAI API at {fake.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
