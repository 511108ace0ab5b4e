"""The Celery app. Workers start with `celery -A config worker -Q <queue>`."""

from __future__ import annotations

import os

from celery import Celery

from core import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

app = Celery("concord")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
broker.app_use(app)
