"""The Celery queues, named in one place."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    """Queues per workload, so that a slow judge never starves analysis and the reverse."""

    DEFAULT = "default"
    LLM_JUDGE = "llm_judge"
    # The judge reconciler alone, so that it never waits behind a backlog of judge calls.
    JUDGE_RECONCILE = "judge_reconcile"
    REWARD_MODEL = "reward_model"
    ANALYSIS = "analysis"
    # A researcher's exports alone, so that one starts when asked, not behind report
    # recomputes (59 s each at 1M judgments) on the analysis queue.
    EXPORT = "export"
