"""The Celery queues, named in one place."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    """Queues per workload, so that a slow judge never starves analysis and the reverse."""

    DEFAULT = "default"
    LLM_JUDGE = "llm_judge"
    REWARD_MODEL = "reward_model"
    ANALYSIS = "analysis"
