"""Gunicorn settings of the web service (`gunicorn -c docker/gunicorn.conf.py config.wsgi`).

Every value comes from the environment, with defaults sized for one small machine; see
docs/scaling.md. Sync workers: each handles one request at a time and holds one persistent
database connection, so `GUNICORN_WORKERS` x `GUNICORN_THREADS` connections per machine.
"""

from __future__ import annotations

import multiprocessing
import os


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# The annotator's requests are short and wait on PostgreSQL: about two per core.
workers = _int("GUNICORN_WORKERS", min(2 * multiprocessing.cpu_count() + 1, 9))
threads = _int("GUNICORN_THREADS", 1)
worker_class = "gthread" if threads > 1 else "sync"
# A request that takes longer is killed and logged; exports and reports run in Celery.
timeout = _int("GUNICORN_TIMEOUT", 60)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = _int("GUNICORN_KEEPALIVE", 5)
# Recycle a worker now and then, staggered, so that slow leaks never pile up.
max_requests = _int("GUNICORN_MAX_REQUESTS", 2000)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", 200)
# Load the application once in the master and fork it: workers share its pages and start at
# once. No database connection is opened at import, so none is shared across the fork.
preload_app = os.environ.get("GUNICORN_PRELOAD", "true").lower() == "true"
# Heartbeat files in memory, not on the container's overlay file system.
worker_tmp_dir = os.environ.get(
    "GUNICORN_WORKER_TMP_DIR", "/dev/shm" if os.path.isdir("/dev/shm") else None
)
# Only the reverse proxy may say which client and scheme a request came from.
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
# "-" writes to stdout; an empty value turns the access log off.
# No runtime control socket: its default path ($HOME/.gunicorn/gunicorn.ctl) is one per user,
# so a second server on the machine would fail to start, and nothing here uses it.
control_socket_disable = True
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
