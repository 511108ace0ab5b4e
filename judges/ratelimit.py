"""A rate limiter shared by every worker: a sliding window log per judge, kept in Redis.

One Lua script decides atomically, on Redis's clock, whether one more request of `tokens` tokens
fits in the last window for both the request and the token budget; if not, it returns how many
milliseconds to wait. Because the decision and the record happen in one script, two workers can
never both take the last slot.
"""

from __future__ import annotations

import time
import uuid
from functools import lru_cache

import redis
from django.conf import settings

from core.errors import ApplicationError

_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local max_requests = tonumber(ARGV[2])
local max_tokens = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local wait = 0
if max_requests > 0 then
  local n = redis.call('ZCARD', KEYS[1])
  if n >= max_requests then
    local entry = redis.call('ZRANGE', KEYS[1], n - max_requests, n - max_requests, 'WITHSCORES')
    wait = math.max(wait, tonumber(entry[2]) + window - now + 1)
  end
end
if max_tokens > 0 then
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #entries, 2 do
    used = used + tonumber(string.match(entries[i], ':(%d+)$'))
  end
  if used > 0 and used + tokens > max_tokens then
    local freed = 0
    local until_ms = tonumber(entries[#entries]) + window - now + 1
    for i = 1, #entries, 2 do
      freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
      if used - freed + tokens <= max_tokens then
        until_ms = tonumber(entries[i + 1]) + window - now + 1
        break
      end
    end
    wait = math.max(wait, until_ms)
  end
end
if wait > 0 then
  return wait
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('ZADD', KEYS[2], now, ARGV[5] .. ':' .. tokens)
redis.call('PEXPIRE', KEYS[1], window + 1000)
redis.call('PEXPIRE', KEYS[2], window + 1000)
return 0
"""


class RateLimitTimeout(ApplicationError):
    """No slot came free within the time the caller was willing to wait."""

    def __init__(self, waited: float):
        super().__init__(f"no rate-limit slot within {waited:.1f} s")
        self.waited = waited


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)


def rate_slot_try(
    *, key: str, requests_per_window: int | None, tokens_per_window: int | None, tokens: int
) -> float:
    """Take a slot if one is free and return 0, or return the seconds until one may be."""
    if not requests_per_window and not tokens_per_window:
        return 0.0
    window_ms = int(settings.CONCORD_JUDGE_RATE_WINDOW_SECONDS * 1000)
    client = _client(settings.REDIS_URL)
    script = client.register_script(_SCRIPT)
    wait_ms = script(
        keys=[f"concord:rate:{key}:requests", f"concord:rate:{key}:tokens"],
        args=[
            window_ms,
            requests_per_window or 0,
            tokens_per_window or 0,
            max(0, tokens),
            uuid.uuid4().hex,
        ],
    )
    return int(wait_ms) / 1000


def rate_slot_acquire(
    *,
    key: str,
    requests_per_window: int | None,
    tokens_per_window: int | None,
    tokens: int,
    max_wait: float,
) -> float:
    """Wait until a slot is free and take it; return the seconds waited.

    Raise RateLimitTimeout when waiting would take longer than `max_wait`, so a worker never
    sleeps past its call's lease.
    """
    started = time.monotonic()
    while True:
        wait = rate_slot_try(
            key=key,
            requests_per_window=requests_per_window,
            tokens_per_window=tokens_per_window,
            tokens=tokens,
        )
        waited = time.monotonic() - started
        if wait <= 0:
            return waited
        if waited + wait > max_wait:
            raise RateLimitTimeout(waited + wait)
        time.sleep(wait)
