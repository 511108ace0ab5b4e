"""The client of OpenAI-compatible chat completion APIs, and the checks that guard it.

The key is read from the environment variable the judge names, at call time; it is never stored,
returned or logged. Base URLs are restricted to http(s), to hosts on the admin's allow-list, and
redirects are not followed, so a judge cannot be pointed at an internal service (SSRF).
"""

from __future__ import annotations

import email.utils
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai
from django.conf import settings


class JudgeNotConfigured(Exception):
    """The judge lacks something it needs to be called (its key, a base URL, a model name)."""


class UnsafeBaseURL(ValueError):
    """A base URL that the allow-list or scheme rules refuse."""


class JudgeCallError(Exception):
    """A call that did not produce a reply. `transient` errors may be retried."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


@dataclass(frozen=True)
class ChatReply:
    content: str
    tokens_in: int
    tokens_out: int
    model_reported: str
    latency_ms: int
    refusal: bool = False


def base_url_check(base_url: str) -> None:
    """Raise UnsafeBaseURL unless the URL is http(s) and its host is on the allow-list."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        raise UnsafeBaseURL(f"base URL {base_url!r} must start with http:// or https://")
    host = (parts.hostname or "").lower()
    if not host:
        raise UnsafeBaseURL(f"base URL {base_url!r} names no host")
    if parts.username or parts.password:
        raise UnsafeBaseURL(f"base URL {base_url!r} must not carry credentials")
    allowed = [entry.lower() for entry in settings.CONCORD_JUDGE_HOST_ALLOWLIST]
    if host not in allowed:
        raise UnsafeBaseURL(
            f"host {host!r} of base URL {base_url!r} is not in CONCORD_JUDGE_HOST_ALLOWLIST "
            f"({', '.join(allowed) or 'empty'}); an admin must add it to the environment"
        )


def api_key_get(api_key_env: str) -> str:
    """Return the key from the environment variable, or raise JudgeNotConfigured naming it."""
    if not api_key_env:
        raise JudgeNotConfigured("not configured: the judge names no key variable (api_key_env)")
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


def error_classify(exc: Exception) -> JudgeCallError:
    """Sort an exception from the openai package into transient or permanent."""
    if isinstance(exc, openai.APITimeoutError):
        return JudgeCallError("timeout: the API did not answer in time", transient=True)
    if isinstance(exc, openai.APIConnectionError):
        return JudgeCallError(f"connection error: {exc}", transient=True)
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


def chat_complete(
    *,
    base_url: str,
    api_key: str,
    model: str,
    messages: list[dict[str, str]],
    params: dict[str, Any],
    idempotency_key: str,
    timeout: float,
) -> ChatReply:
    """Send one chat completion request; raise JudgeCallError when no usable reply comes back.

    The openai package's own retries are off: retries are Celery's, so that they are counted,
    spread out with jitter and never outlive the broker's visibility timeout.
    """
    base_url_check(base_url)
    http_client = openai.DefaultHttpxClient(follow_redirects=False, timeout=timeout)
    client = openai.OpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http_client
    )
    allowed = {"temperature", "max_tokens", "top_p", "seed", "stop", "max_completion_tokens"}
    extra = {key: value for key, value in params.items() if key in allowed}
    started = time.monotonic()
    try:
        with client:
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
        raise
    except Exception as exc:  # noqa: BLE001 - every failure is classified, none is swallowed
        raise error_classify(exc) from exc
    latency_ms = int((time.monotonic() - started) * 1000)
    if isinstance(completion, str) or not getattr(completion, "choices", None):
        raise JudgeCallError("malformed response: no choices in the reply", transient=True)
    choice = completion.choices[0]
    message = choice.message
    usage = completion.usage
    refusal = bool(getattr(message, "refusal", None)) or choice.finish_reason == "content_filter"
    content = message.content or getattr(message, "refusal", None) or ""
    return ChatReply(
        content=content,
        tokens_in=usage.prompt_tokens if usage else 0,
        tokens_out=usage.completion_tokens if usage else 0,
        model_reported=completion.model or "",
        latency_ms=latency_ms,
        refusal=refusal,
    )
