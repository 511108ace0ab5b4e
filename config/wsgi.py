"""WSGI entry point."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

application = get_wsgi_application()
# Import the URL configuration now rather than in a worker's first request. It is cheap: the
# analysis pages' views (and pandas, scipy, numba) load on their own first request.
get_resolver().url_patterns  # noqa: B018 - the property imports the modules
