# mypy: ignore-errors
"""Label Studio's own settings for the benchmark, with its job queue kept off other Redis servers.

Loaded by Label Studio's server and by benchmarks/label_studio_side.py, inside Label Studio's
venv (this folder on PYTHONPATH), as DJANGO_SETTINGS_MODULE=label_studio_settings. Label Studio
1.23.2 hard-codes its RQ queues to localhost:6379 and pings that server when `core.redis` is
imported, even with REDIS_ENABLED false; here they point at the benchmark's own Redis (REDIS_URL,
loopback), which Label Studio then only pings: with REDIS_ENABLED false it runs every job inside
the request, as a plain `label-studio start` does. Everything else is Label Studio's.
"""

import os
from urllib.parse import urlparse

# Label Studio's settings read django.conf.settings while they load (to set up Sentry), which
# then loads DJANGO_SETTINGS_MODULE half-done: name its own module there for that inner load, as
# a plain Label Studio process has it; this module's values replace it once it has loaded.
os.environ["DJANGO_SETTINGS_MODULE"] = "core.settings.label_studio"
from core.settings.label_studio import *  # noqa: E402, F403

os.environ["DJANGO_SETTINGS_MODULE"] = __name__

_redis = urlparse(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"))
for _queue in RQ_QUEUES.values():  # noqa: F405
    _queue.update(HOST=_redis.hostname or "127.0.0.1", PORT=_redis.port or 6379, DB=15)
REDIS_ENABLED = False
