"""Celery tasks of the annotation app: thin doors that call one service."""

from __future__ import annotations

from celery import shared_task

from annotation.services.assignments import assignments_expire


# Runs on the default queue (no route needed); the beat schedule in the settings starts it.
@shared_task(name="annotation.assignments_expire", acks_late=True)
def assignments_expire_task() -> int:
    """Mark reservations past their time as expired (safe to run twice; run every minute)."""
    return assignments_expire()
