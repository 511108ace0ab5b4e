"""The client of OpenAI-compatible chat completion APIs, and the checks that guard it.

The key is read from the environment variable the judge names, at call time; it is never stored,
returned or logged. Base URLs are restricted to http(s), to hosts on the admin's allow-list, and
redirects are not followed, so a judge cannot be pointed at an internal service (SSRF).
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import os
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2
import openai
from django.conf import settings

from core.errors import ApplicationError


class JudgeNotConfigured(ApplicationError):
    """The judge lacks something it needs to be called (its key, a base URL, a model name)."""


class UnsafeBaseURL(ApplicationError, ValueError):
    """A base URL that the allow-list or scheme rules refuse."""


class JudgeCallError(ApplicationError):
    """A call that did not produce a reply. `transient` errors may be retried.

    `maybe_paid` is set when the request reached the API and the reply was lost on the way back
    (a timeout after sending, a connection dropped mid-reply): the API may have generated, and
    billed, a reply that nobody recorded.
    """

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        retry_after: float | None = None,
        maybe_paid: bool = False,
    ):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.maybe_paid = maybe_paid


@dataclass(frozen=True)
class ChatReply:
    content: str
    tokens_in: int
    tokens_out: int
    model_reported: str
    latency_ms: int
    refusal: bool = False
    refusal_reason: str = ""


# The settings' own secrets and connection strings: a judge naming one of them as its key would
# send it to the judge's server (and show "ready").
RESERVED_KEY_VARIABLES: frozenset[str] = frozenset(
    {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CACHE_URL",
     "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "PGPASSWORD", "POSTGRES_PASSWORD"}
)  # fmt: skip
RESERVED_KEY_PREFIXES: tuple[str, ...] = ("DJANGO_", "AXES_", "DATABASE_", "SECURE_")


def api_key_env_reserved(name: str) -> bool:
    """True when `name` is one of the settings' own variables, never a judge's key."""
    upper = name.upper()
    return upper in RESERVED_KEY_VARIABLES or upper.startswith(RESERVED_KEY_PREFIXES)


def api_key_env_allowed(name: str) -> bool:
    """True when `name` is on CONCORD_JUDGE_KEY_ENV_ALLOWED (an entry ending in "*" allows every
    name it begins) and is not one of the settings' own variables."""
    if api_key_env_reserved(name):
        return False
    for entry in settings.CONCORD_JUDGE_KEY_ENV_ALLOWED:
        if name == entry or (entry.endswith("*") and name.startswith(entry[:-1])):
            return True
    return False


def api_key_env_refusal(name: str) -> str:
    """Why a judge may not read its key from `name` (for a name api_key_env_allowed refuses)."""
    allowed = ", ".join(settings.CONCORD_JUDGE_KEY_ENV_ALLOWED) or "none"
    return (
        f"{name} is not a variable a judge may read its key from: allowed are {allowed} "
        "(CONCORD_JUDGE_KEY_ENV_ALLOWED, set by an admin in the environment)"
    )


def base_url_check(base_url: str) -> None:
    """Raise UnsafeBaseURL unless the URL is http(s), its host is on the allow-list and its port
    is allowed: the scheme's default, one of CONCORD_JUDGE_ALLOWED_PORTS, or the port an entry
    names (`host:8001`; `host:*` for any port)."""
    try:
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError as exc:
        raise UnsafeBaseURL(f"base URL {base_url!r} is not a valid URL ({exc})") from exc
    if parts.scheme not in ("http", "https"):
        raise UnsafeBaseURL(f"base URL {base_url!r} must start with http:// or https://")
    if not host:
        raise UnsafeBaseURL(f"base URL {base_url!r} names no host")
    if parts.username or parts.password:
        raise UnsafeBaseURL(f"base URL {base_url!r} must not carry credentials")
    entries = [entry.lower() for entry in settings.CONCORD_JUDGE_HOST_ALLOWLIST]
    allowed = {entry.rsplit(":", 1)[0] if ":" in entry else entry for entry in entries}
    if host not in allowed:
        raise UnsafeBaseURL(
            f"host {host!r} of base URL {base_url!r} is not in CONCORD_JUDGE_HOST_ALLOWLIST "
            f"({', '.join(entries) or 'empty'}); an admin must add it to the environment"
        )
    if port is None or port in settings.CONCORD_JUDGE_ALLOWED_PORTS:
        return
    if f"{host}:*" in entries or f"{host}:{port}" in entries:
        return
    ports = ", ".join(map(str, settings.CONCORD_JUDGE_ALLOWED_PORTS))
    raise UnsafeBaseURL(
        f"port {port} of base URL {base_url!r} is not allowed; allowed are the default ports and "
        f"CONCORD_JUDGE_ALLOWED_PORTS ({ports}), or add {host}:{port} to "
        "CONCORD_JUDGE_HOST_ALLOWLIST"
    )


def api_key_get(api_key_env: str) -> str:
    """Return the key from the environment variable, or raise JudgeNotConfigured naming it."""
    if not api_key_env:
        raise JudgeNotConfigured("not configured: the judge names no key variable (api_key_env)")
    if api_key_env_reserved(api_key_env):
        raise JudgeNotConfigured(f"not configured: {api_key_env} is a setting, not a judge's key")
    if not api_key_env_allowed(api_key_env):
        raise JudgeNotConfigured(f"not configured: {api_key_env_refusal(api_key_env)}")
    key = os.environ.get(api_key_env, "")
    if not key:
        raise JudgeNotConfigured(f"not configured: set {api_key_env}")
    return key


def _retry_after(response: Any) -> float | None:
    """Seconds from a Retry-After header (a number or an HTTP date), if there is one."""
    if response is None:
        return None
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_to_datetime(value)
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


def error_classify(exc: Exception, *, late: float | None = None) -> JudgeCallError:
    """Sort an exception from the openai package into transient or permanent.

    `late` is how long after the request's deadline the worker came back to it
    (_DeadlineBackend.lateness). It is a scheduler's tick on a machine with CPU to spare; seconds
    mean the worker's thread was kept from running (a loaded machine, a paused process), and the
    timeout message says so, since no deadline can end a request while its thread does not run.
    """
    # A request that never connected cannot have been paid; any other lost reply may have been.
    never_sent = isinstance(exc.__cause__, httpx2.ConnectError | httpx2.ConnectTimeout)
    if isinstance(exc, openai.APITimeoutError):
        detail = "" if late is None else f"; the worker came back to it {late:.2f} s after it"
        return JudgeCallError(
            f"timeout: the API did not answer within the request's deadline{detail}",
            transient=True,
            maybe_paid=not never_sent,
        )
    if isinstance(exc, openai.APIConnectionError):
        return JudgeCallError(f"connection error: {exc}", transient=True, maybe_paid=not never_sent)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = _retry_after(exc.response)
        if 300 <= status < 400:
            location = exc.response.headers.get("location", "")
            return JudgeCallError(
                f"HTTP {status}: redirect to {location[:200]!r} not followed", transient=False
            )
        transient = status == 429 or status >= 500 or status == 408
        body = str(exc.message)[:300]
        return JudgeCallError(
            f"HTTP {status}: {body}", transient=transient, retry_after=retry_after
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return JudgeCallError(f"malformed response: {exc}", transient=True)
    if isinstance(exc, ValueError):
        # A body that is not JSON (a proxy's error page, a truncated reply): try again.
        return JudgeCallError(f"malformed response: {exc}", transient=True)
    return JudgeCallError(f"{type(exc).__name__}: {exc}", transient=False)


# Past the deadline a read waits at most this long, for bytes the kernel already holds (no
# longer than a scheduler's tick), and a late reader drains what is waiting for at most
# LATE_DRAIN_SECONDS of its own time, so a server that keeps sending cannot hold it for ever.
LATE_READ_WAIT = 0.005
LATE_DRAIN_SECONDS = 0.25


class _DeadlineStream(httpcore2.NetworkStream):
    """A socket stream whose every read and write ends by one total deadline.

    httpx's timeouts apply to each read, so a server that trickles its reply a byte at a time
    could hold a request for ever; here each wait is cut to the time left before the deadline.

    The deadline bounds waiting, not reading: bytes that reached this machine are read whenever
    the reading thread gets the CPU. A worker thread starved of CPU (a loaded machine, a paused
    process) may come to its read after the deadline although the whole reply arrived in time;
    the reply is then read from the socket without waiting, instead of being thrown away and
    paid for again. Only a read that finds nothing waiting past the deadline times out.
    """

    def __init__(
        self,
        stream: httpcore2.NetworkStream,
        deadline: float,
        backend: _DeadlineBackend | None = None,
    ):
        self._stream = stream
        self._own_deadline = deadline
        self._backend = backend
        self._late_since: float | None = None
        # The deadline the late reads above were late for: a kept-alive connection serves the
        # next request of its client under that request's deadline (the backend's).
        self._late_for = deadline

    @property
    def _deadline(self) -> float:
        deadline = self._own_deadline if self._backend is None else self._backend.deadline
        if deadline != self._late_for:
            self._late_for, self._late_since = deadline, None
        return deadline

    def _left(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise error("the request's total deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        now = time.monotonic()
        left = self._deadline - now
        if left > 0:
            wait = left if timeout is None else min(timeout, left)
            return self._stream.read(max_bytes, wait)
        if self._late_since is None:
            self._late_since = now
            if self._backend is not None and self._backend.late_since is None:
                self._backend.late_since = now
        if now - self._late_since > LATE_DRAIN_SECONDS:
            raise httpcore2.ReadTimeout("the request's total deadline passed")
        # What the kernel already received comes back at once; an empty socket times out.
        return self._stream.read(max_bytes, LATE_READ_WAIT)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            # h11 ends a request with an empty write: nothing to wait for, so no deadline to
            # pass (a late thread would otherwise drop a request it had sent in full).
            return
        self._stream.write(buffer, self._left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        left = self._left(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(
            self._stream.start_tls(ssl_context, server_hostname, left),
            self._deadline,
            self._backend,
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore's own socket backend, with connections whose streams end by `deadline`."""

    def __init__(self, deadline: float):
        self._backend = httpcore2.SyncBackend()
        self.deadline = deadline
        # When a read first ran past the deadline (None while none has): how late the worker's
        # thread came back to its socket, which the timeout message reports.
        self.late_since: float | None = None

    def lateness(self) -> float:
        """Seconds after the deadline that the worker came back to its request: when its
        first late read ran, or now if none did (a wait that ran out, then the thread waited
        for the CPU). A drain of bytes already received is not counted."""
        came_back = time.monotonic() if self.late_since is None else self.late_since
        return max(0.0, came_back - self.deadline)

    def _left(self, timeout: float | None) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise httpcore2.ConnectTimeout("the request's total deadline passed")
        return left if timeout is None else min(timeout, left)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore2.NetworkStream:
        stream = self._backend.connect_tcp(
            host, port, self._left(timeout), local_address, socket_options
        )
        return _DeadlineStream(stream, self.deadline, self)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore2.NetworkStream:
        stream = self._backend.connect_unix_socket(path, self._left(timeout), socket_options)
        return _DeadlineStream(stream, self.deadline, self)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The process's one TLS context for judge APIs, built as httpx builds its default (the CA
    bundle, SSL_CERT_FILE / SSL_CERT_DIR honoured). Building one loads the whole CA bundle, about
    20 ms of CPU: a transport built per call with its own context spent most of a call's time
    there against a fast API (benchmarks/bench_judge_pipeline.py). A context is safe to share
    between threads once built."""
    return httpx2.create_ssl_context()


def _transport_with(backend: _DeadlineBackend) -> httpx2.HTTPTransport:
    """An httpx transport whose connections end by the backend's deadline.

    httpx takes no network backend as an argument, so the pool's is replaced; a test trickling
    a reply past the deadline (tests/judges/test_calls.py) catches any change of that attribute.
    """
    transport = httpx2.HTTPTransport(verify=_ssl_context())
    transport._pool._network_backend = backend
    return transport


@dataclass
class ChatClient:
    """An API client built ahead of its request (building one takes a while), so that the
    request leaves right after the call is claimed; its deadline starts when the request does."""

    client: openai.OpenAI
    backend: _DeadlineBackend
    timeout: float
    # A kept client (chat_client_kept) stays open between requests, its connections alive.
    kept: bool = False


def chat_client(*, base_url: str, api_key: str, timeout: float, kept: bool = False) -> ChatClient:
    """Check the base URL and build a client whose requests each end within `timeout` seconds."""
    base_url_check(base_url)
    backend = _DeadlineBackend(time.monotonic() + timeout)
    transport = _transport_with(backend)
    http_client = openai.DefaultHttpxClient(
        follow_redirects=False, timeout=timeout, transport=transport
    )
    client = openai.OpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http_client
    )
    return ChatClient(client=client, backend=backend, timeout=timeout, kept=kept)


_kept = threading.local()


def chat_client_kept(*, base_url: str, api_key: str, timeout: float) -> ChatClient:
    """This thread's client for one base URL, key and deadline, kept open between requests.

    Building a client (the OpenAI SDK's, its httpx pool) took about a millisecond of CPU per call,
    and each call opened a new connection; a kept client reuses both (one thread at a time: a
    client is never shared between threads). A request that fails closes it, and the next
    request builds a new one. The base URL is checked on every call, as chat_client does.
    """
    base_url_check(base_url)
    clients: dict[tuple[str, str, float], ChatClient] = _kept.__dict__.setdefault("clients", {})
    # The key is part of what tells clients apart, by its digest (a changed key: a new client).
    name = (base_url, hashlib.sha256(api_key.encode()).hexdigest(), timeout)
    client = clients.get(name)
    if client is None:
        client = clients[name] = chat_client(
            base_url=base_url, api_key=api_key, timeout=timeout, kept=True
        )
    return client


def _kept_drop(prepared: ChatClient) -> None:
    """Close a kept client after a failed request and forget it (its connection may be broken)."""
    clients: dict[tuple[str, str, float], ChatClient] = _kept.__dict__.get("clients", {})
    for name, client in list(clients.items()):
        if client is prepared:
            del clients[name]
    prepared.client.close()


def _refusal_reason(choice: Any) -> str:
    """The provider's reason for a refusal or a filtered reply, or "" when there is none."""
    message = choice.message
    if getattr(message, "refusal", None):
        return f"the model refused: {str(message.refusal)[:300]}"
    if choice.finish_reason != "content_filter":
        return ""
    extra = getattr(choice, "model_extra", None) or {}
    results = extra.get("content_filter_results") or {}
    hits = [
        f"{category} ({verdict.get('severity', 'filtered')})"
        for category, verdict in sorted(results.items())
        if isinstance(verdict, dict) and verdict.get("filtered")
    ]
    detail = f": {', '.join(hits)}" if hits else ""
    return (
        f"the provider's content filter withheld the reply (finish_reason content_filter){detail}"
    )


def _client_done(prepared: ChatClient, *, failed: bool) -> None:
    """Close a one-request client, and a kept one whose request failed."""
    if not prepared.kept:
        prepared.client.close()
    elif failed:
        _kept_drop(prepared)


def chat_complete(
    *,
    base_url: str,
    api_key: str,
    model: str,
    messages: list[dict[str, str]],
    params: dict[str, Any],
    idempotency_key: str,
    timeout: float,
    prepared: ChatClient | None = None,
) -> ChatReply:
    """Send one chat completion request; raise JudgeCallError when no usable reply comes back.

    `timeout` is the request's total deadline, from connecting to the last byte of the reply (not
    a limit per read). The openai package's own retries are off: retries are Celery's, so that
    they are counted, spread out with jitter and never outlive the broker's visibility timeout.
    `prepared` is a client built ahead (chat_client); without it one is built here.
    """
    prepared = prepared or chat_client(base_url=base_url, api_key=api_key, timeout=timeout)
    prepared.backend.deadline = time.monotonic() + prepared.timeout
    prepared.backend.late_since = None
    client = prepared.client
    allowed = {"temperature", "max_tokens", "top_p", "seed", "stop", "max_completion_tokens"}
    extra = {key: value for key, value in params.items() if key in allowed}
    started = time.monotonic()
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            # Compatible gateways (and the test server) use it to answer a resent request
            # from their cache instead of generating, and charging, a second time.
            extra_headers={"Idempotency-Key": idempotency_key},
            **extra,
        )
        if 300 <= raw.http_response.status_code < 400:
            raise JudgeCallError(
                f"HTTP {raw.http_response.status_code}: redirects are not followed",
                transient=False,
            )
        completion = raw.parse()
    except JudgeCallError:
        _client_done(prepared, failed=True)
        raise
    except Exception as exc:  # noqa: BLE001 - every failure is classified, none is swallowed
        _client_done(prepared, failed=True)
        raise error_classify(exc, late=prepared.backend.lateness()) from exc
    _client_done(prepared, failed=False)
    latency_ms = int((time.monotonic() - started) * 1000)
    if isinstance(completion, str) or not getattr(completion, "choices", None):
        raise JudgeCallError("malformed response: no choices in the reply", transient=True)
    choice = completion.choices[0]
    message = choice.message
    usage = completion.usage
    reason = _refusal_reason(choice)
    refusal = bool(reason)
    content = message.content or getattr(message, "refusal", None) or ""
    return ChatReply(
        content=content,
        tokens_in=usage.prompt_tokens if usage else 0,
        tokens_out=usage.completion_tokens if usage else 0,
        model_reported=completion.model or "",
        latency_ms=latency_ms,
        refusal=refusal,
        refusal_reason=reason,
    )
