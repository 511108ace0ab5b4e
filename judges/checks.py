"""System checks of the judges' settings, run at every start (`manage.py check`, workers)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register


@register()
def judge_deadline_below_lease(**kwargs: Any) -> list[CheckMessage]:
    """A request's deadline must end before its call's lease, or a live call is handed out twice."""
    timeout = settings.CONCORD_JUDGE_TIMEOUT_SECONDS
    lease = settings.CONCORD_JUDGE_LEASE_SECONDS
    if timeout <= 0 or timeout >= lease:
        return [
            Error(
                f"CONCORD_JUDGE_TIMEOUT_SECONDS ({timeout:g}) must be above 0 and below "
                f"CONCORD_JUDGE_LEASE_SECONDS ({lease}): the request's deadline has to end "
                "before the reconciler may hand its call to another worker",
                id="judges.E001",
            )
        ]
    return []


@register()
def judge_call_time_limit_above_lease(**kwargs: Any) -> list[CheckMessage]:
    """A call's task may wait a lease for its rate-limit slot and run a lease once claimed; its
    soft time limit must come after both, or it could stop a call that is still its own."""
    from judges.tasks import CALL_SOFT_TIME_LIMIT

    lease = settings.CONCORD_JUDGE_LEASE_SECONDS
    if 2 * lease >= CALL_SOFT_TIME_LIMIT:
        return [
            Error(
                f"CONCORD_JUDGE_LEASE_SECONDS ({lease}) must be below half the soft time limit "
                f"of judges.call_execute ({CALL_SOFT_TIME_LIMIT} s, judges/tasks.py): a call "
                "waits up to a lease for its rate-limit slot and runs up to a lease once claimed",
                id="judges.E002",
            )
        ]
    return []
