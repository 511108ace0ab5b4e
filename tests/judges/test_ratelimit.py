"""The shared rate limiter, against the real Redis."""

from __future__ import annotations

import pytest

from judges.ratelimit import RateLimitTimeout, rate_slot_acquire, rate_slot_try


def test_requests_beyond_the_limit_wait_for_the_window(settings):
    settings.CONCORD_JUDGE_RATE_WINDOW_SECONDS = 5
    waits = [
        rate_slot_try(key="t-req", requests_per_window=3, tokens_per_window=None, tokens=1)
        for _ in range(4)
    ]
    assert waits[:3] == [0, 0, 0]
    assert 4 < waits[3] <= 5.01


def test_tokens_beyond_the_limit_wait_but_one_oversized_request_still_passes(settings):
    settings.CONCORD_JUDGE_RATE_WINDOW_SECONDS = 5
    assert (
        rate_slot_try(key="t-tok", requests_per_window=None, tokens_per_window=100, tokens=70) == 0
    )
    assert (
        rate_slot_try(key="t-tok", requests_per_window=None, tokens_per_window=100, tokens=40) > 0
    )
    assert (
        rate_slot_try(key="t-tok", requests_per_window=None, tokens_per_window=100, tokens=30) == 0
    )
    assert (
        rate_slot_try(key="t-big", requests_per_window=None, tokens_per_window=100, tokens=500) == 0
    )


def test_acquire_waits_for_a_slot_and_gives_up_past_its_patience(settings):
    settings.CONCORD_JUDGE_RATE_WINDOW_SECONDS = 0.3
    for _ in range(2):
        rate_slot_acquire(
            key="t-acq", requests_per_window=2, tokens_per_window=None, tokens=1, max_wait=1
        )
    waited = rate_slot_acquire(
        key="t-acq", requests_per_window=2, tokens_per_window=None, tokens=1, max_wait=1
    )
    assert waited > 0.1
    settings.CONCORD_JUDGE_RATE_WINDOW_SECONDS = 60
    rate_slot_acquire(
        key="t-slow", requests_per_window=1, tokens_per_window=None, tokens=1, max_wait=1
    )
    with pytest.raises(RateLimitTimeout):
        rate_slot_acquire(
            key="t-slow", requests_per_window=1, tokens_per_window=None, tokens=1, max_wait=1
        )
