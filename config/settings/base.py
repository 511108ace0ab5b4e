"""Settings shared by every environment.

This is the one module that reads the environment. The test, demo and production modules only
choose defaults (by setting environment variables before importing this module) or add checks.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parents[2]

env = environ.Env()

SECRET_KEY: str = env.str("SECRET_KEY", default="")
DEBUG: bool = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS: list[str] = env.list("ALLOWED_HOSTS", default=[])
CSRF_TRUSTED_ORIGINS: list[str] = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# DATABASE_URL has no default here: each environment module names its own, and production must
# be told where its database is.
DATABASES = {"default": env.db("DATABASE_URL")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# Persistent connections: each web process, Celery worker process (or thread) keeps one
# connection for up to DATABASE_CONN_MAX_AGE seconds (0 closes it after every request or task),
# checked at the start of each request or task, so a connection the server dropped is replaced
# rather than failing the request. Sizing: docs/scaling.md.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("DATABASE_CONN_HEALTH_CHECKS", default=True)
# Django's PostgreSQL backend with a health check that asks the server only when the connection's
# socket says something happened or a round trip is due (core/db/postgresql/base.py).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "core.db.postgresql"
# The annotator's per-request statements (core.db.prepared.prepared_cursor) are
# prepared on the server, so PostgreSQL plans each once per connection; planning those joins took
# several times longer than running them. Nothing else is prepared: Django's own cursors bind on
# the client and never prepare, and the threshold only has to be set for psycopg to prepare at
# all. Turn it off (DATABASE_PREPARED_STATEMENTS=false) behind a PgBouncer in transaction mode
# older than 1.21 or without max_prepared_statements (docs/scaling.md).
if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 2**31 - 1
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    # The admin site for admins only (annotation/admin_site.py).
    "annotation.admin_site.ConcordAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "axes",
    # core holds no models; it is an app for its management commands (sqlmigration).
    "core",
    "annotation",
    "judges",
    "leaderboard",
]

MIDDLEWARE = [
    # /healthz and /readyz, before host checks and the HTTPS redirect (core/health.py).
    "core.health.HealthCheckMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files from STATIC_ROOT, compressed and cached, by the app itself.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # 413 for a body over its path's limit, 411 for a chunked one, before anything reads it
    # (core/uploads.py).
    "core.uploads.RequestSizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # An ApplicationError no view caught: its message on a page, not a server error
    # (core/errorhandlers.py; DRF's views answer it as JSON with EXCEPTION_HANDLER below).
    "core.errorhandlers.ApplicationErrorMiddleware",
    "core.csp.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: turns a locked-out log-in into its 429 response.
    "axes.middleware.AxesMiddleware",
]

# Password log-ins (/accounts/login/, /admin/login/) are throttled by django-axes (core/auth.py):
# after AXES_FAILURE_LIMIT wrong passwords for one username from one address, that pair is
# refused for AXES_COOLOFF_TIME, even with the right password. Keyed on username and address
# together, so nobody can lock a researcher out from elsewhere.
AUTHENTICATION_BACKENDS = [
    "core.auth.WebLoginThrottleBackend",
    # ModelBackend with its per-request user read compiled once (core/auth.py).
    "core.auth.AccountBackend",
    # Sessions made before the backend moved from config/ name this path (config/auth.py).
    "config.auth.AccountBackend",
]
# Django's database sessions, their per-request read compiled once (core/sessions.py).
SESSION_ENGINE = "core.sessions"
AXES_FAILURE_LIMIT: int = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("AXES_COOLOFF_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.clientaddr.request_client_address"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "config" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=str(BASE_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "config" / "static"]
# Local state of this checkout: the demo's database and passwords, exports, uploads.
CONCORD_VAR_DIR = env.path("CONCORD_VAR_DIR", default=str(BASE_DIR / "var"))
MEDIA_ROOT = env.path("MEDIA_ROOT", default=str(BASE_DIR / "var" / "media"))
# Raw-row downloads of tables bigger than this are built by a Celery worker into
# CONCORD_VAR_DIR/exports instead of inside the web request.
CONCORD_EXPORT_SYNC_MAX_ROWS: int = env.int("CONCORD_EXPORT_SYNC_MAX_ROWS", default=100_000)
# Background exports: a job pending or running this long without finishing is queued again (its
# message or its worker was lost), up to CONCORD_EXPORT_MAX_ATTEMPTS builds; finished files are
# deleted after CONCORD_EXPORT_KEEP_DAYS.
CONCORD_EXPORT_STALE_MINUTES: float = env.float("CONCORD_EXPORT_STALE_MINUTES", default=30.0)
CONCORD_EXPORT_MAX_ATTEMPTS: int = env.int("CONCORD_EXPORT_MAX_ATTEMPTS", default=3)
CONCORD_EXPORT_KEEP_DAYS: float = env.float("CONCORD_EXPORT_KEEP_DAYS", default=7.0)
# The Plackett-Luce reward model: trained models (weights + metadata, one folder each) and the
# sentence-embedding cache (one vector per text and backbone, so retraining never re-encodes).
CONCORD_REWARD_ARTIFACTS_DIR = env.path(
    "CONCORD_REWARD_ARTIFACTS_DIR", default=str(Path(str(CONCORD_VAR_DIR)) / "reward" / "models")
)
CONCORD_REWARD_CACHE_DIR = env.path(
    "CONCORD_REWARD_CACHE_DIR", default=str(Path(str(CONCORD_VAR_DIR)) / "reward" / "embeddings")
)
# The only folders a researcher's "Hugging Face checkpoint" field may name (the PL model's hf
# mode): folders under this root, resolved (links and `..` followed); anything else gets one
# error that says nothing of the server's files.
CONCORD_PL_CHECKPOINTS_ROOT = env.path(
    "CONCORD_PL_CHECKPOINTS_ROOT",
    default=str(Path(str(CONCORD_VAR_DIR)) / "reward" / "checkpoints"),
)
# A running training whose worker wrote no epoch for this long is marked failed (its worker
# died); a retry trains it again.
CONCORD_REWARD_HEARTBEAT_STALE_SECONDS: int = env.int(
    "CONCORD_REWARD_HEARTBEAT_STALE_SECONDS", default=600
)
# A PL run's scoring: the worker's lease on the run, renewed by its heartbeat every quarter of
# it; a run whose lease ran out (its worker died) is queued again by the reconciler (every
# CONCORD_REWARD_RECONCILE_SECONDS), and failed after this many claims; answers per batch.
CONCORD_REWARD_SCORE_LEASE_SECONDS: float = env.float(
    "CONCORD_REWARD_SCORE_LEASE_SECONDS", default=120.0
)
CONCORD_REWARD_SCORE_MAX_ATTEMPTS: int = env.int("CONCORD_REWARD_SCORE_MAX_ATTEMPTS", default=3)
# A pending PL run that no worker claimed this many seconds after its message was sent lost
# that message: the reconciler sends another, once no message waits in the reward_model queue.
CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS: float = env.float(
    "CONCORD_REWARD_SCORE_QUEUED_GRACE_SECONDS", default=600.0
)
# A pending PL training that no worker claimed this many seconds after its message was sent
# lost that message: the trainings' reconciler sends another, once no message waits in the
# reward_model queue.
CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS: float = env.float(
    "CONCORD_REWARD_TRAINING_QUEUED_GRACE_SECONDS", default=600.0
)
CONCORD_REWARD_RECONCILE_SECONDS: float = env.float(
    "CONCORD_REWARD_RECONCILE_SECONDS", default=60.0
)
CONCORD_REWARD_SCORE_BATCH: int = env.int("CONCORD_REWARD_SCORE_BATCH", default=256)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Uploads above this size are streamed to a temporary file instead of kept in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# The largest import file the upload page accepts.
CONCORD_MAX_IMPORT_BYTES: int = env.int("CONCORD_MAX_IMPORT_BYTES", default=200 * 1024 * 1024)
# The largest request body of any other path (log-in, forms, the JSON API), refused from its
# Content-Length before it is read (core/uploads.py); the same as DATA_UPLOAD_MAX_MEMORY_SIZE.
CONCORD_MAX_BODY_BYTES: int = env.int("CONCORD_MAX_BODY_BYTES", default=5 * 1024 * 1024)

# Participant entry (see docs/security.md). The reverse proxies whose X-Forwarded-For is read
# for the client's address: addresses or networks, e.g. "10.0.0.0/8,127.0.0.1". Empty means
# REMOTE_ADDR is the client (no proxy, or one that rewrites REMOTE_ADDR itself).
CONCORD_TRUSTED_PROXIES: list[str] = env.list("CONCORD_TRUSTED_PROXIES", default=[])
# Refused entry attempts per client address a minute before refusals are answered 429 (a valid
# entry still goes through), and successful entries per address a minute (a shared campus
# network is many people). Each study also has its own budget, Study.entry_attempts_per_minute.
CONCORD_ENTRY_REFUSED_PER_ADDRESS_PER_MINUTE: int = env.int(
    "CONCORD_ENTRY_REFUSED_PER_ADDRESS_PER_MINUTE", default=30
)
CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE: int = env.int(
    "CONCORD_ENTRY_PER_ADDRESS_PER_MINUTE", default=60
)

# --- Prolific ---------------------------------------------------------------------------------
# Prolific's API for Data Collectors. The base URL is the deployment's, never a researcher's; its
# host (host:port, or host:* for any port) must be on the allow-list, so a mistaken setting cannot
# send a study's token elsewhere. Tests point it at a local fake server.
PROLIFIC_API_BASE: str = env.str("PROLIFIC_API_BASE", default="https://api.prolific.com")
CONCORD_PROLIFIC_HOST_ALLOWLIST: list[str] = env.list(
    "CONCORD_PROLIFIC_HOST_ALLOWLIST", default=["api.prolific.com"]
)
# Seconds to connect and to read one reply of Prolific's API (entry waits on one look-up).
PROLIFIC_API_TIMEOUT_SECONDS: float = env.float("PROLIFIC_API_TIMEOUT_SECONDS", default=5.0)

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

REST_FRAMEWORK = {
    # An ApplicationError no API class caught: {"detail": message, "code": code}, 400/409.
    "EXCEPTION_HANDLER": "core.errorhandlers.api_exception_handler",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # 400, not 500, for JSON nested too deep (see core/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}

CELERY_BROKER_URL: str = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
# Durable state lives in the database; the broker only carries ids, so no result backend.
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# Redis hands a message nobody acknowledged within this many seconds to another worker. Tasks
# acknowledge late, so it must outlast every task's hard time limit (core.tasks; the longest,
# PL training and scoring, 7500 s), or a long task's message would run twice at once.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3 * 3600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

REDIS_URL: str = env.str("REDIS_URL", default="redis://127.0.0.1:6379/1")

# The cache holds counters that must be shared by every web process (the entry rate limit), so
# it lives in Redis, not in each process's memory.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env.str("CACHE_URL", default=REDIS_URL),
        "KEY_PREFIX": "concord",
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}

# --- Judges -----------------------------------------------------------------------------------
# Hosts a judge's base URL may point at. An admin sets this in the environment; a base URL whose
# host is not listed is refused when the judge is saved and again when it is called (SSRF).
CONCORD_JUDGE_HOST_ALLOWLIST: list[str] = env.list(
    "CONCORD_JUDGE_HOST_ALLOWLIST", default=["api.openai.com", "127.0.0.1", "localhost"]
)
# The environment variables a judge may name as its key (`api_key_env`): whole names, or
# prefixes ending in "*". Any other variable (AWS_SECRET_ACCESS_KEY, HOME) is refused when the
# judge is saved and again when it is called, so that a researcher cannot send it to a host.
CONCORD_JUDGE_KEY_ENV_ALLOWED: list[str] = env.list(
    "CONCORD_JUDGE_KEY_ENV_ALLOWED", default=["OPENAI_API_KEY", "CONCORD_JUDGE_KEY_*"]
)
# Ports a judge's base URL may name besides the scheme's default: common OpenAI-compatible
# servers (LM Studio 1234, vLLM 8000, llama.cpp 8080, Ollama 11434), never Redis or PostgreSQL.
# An allow-list entry "host:port" (or "host:*") allows more for that host only.
CONCORD_JUDGE_ALLOWED_PORTS: list[int] = env.list(
    "CONCORD_JUDGE_ALLOWED_PORTS", cast=int, default=[1234, 8000, 8080, 11434]
)
# The total deadline of one request to a judge's API, from connecting to the last byte of the
# reply (not a limit per read: a reply trickled slowly is cut off at this time too).
CONCORD_JUDGE_TIMEOUT_SECONDS: float = env.float("CONCORD_JUDGE_TIMEOUT_SECONDS", default=60.0)
# Total deadline of the "Test connection" button on a judge's page (one tiny call, made by a
# worker on the default queue; the page polls its answer).
CONCORD_JUDGE_TEST_SECONDS: float = env.float("CONCORD_JUDGE_TEST_SECONDS", default=10.0)
# Seconds a claimed call may run before the reconciler hands it to another worker. It must
# exceed the request's deadline (checked at start, judges.checks), so a live call is never
# handed out twice; what is left after the deadline is the time to record the reply.
CONCORD_JUDGE_LEASE_SECONDS: int = env.int("CONCORD_JUDGE_LEASE_SECONDS", default=180)
# A message that comes this many seconds or less before its call's retry time waits for it;
# one that comes earlier is a duplicate and is dropped.
CONCORD_JUDGE_EARLY_TOLERANCE_SECONDS: float = env.float(
    "CONCORD_JUDGE_EARLY_TOLERANCE_SECONDS", default=2.0
)
# Judge runs one study may have queued or running at once (judges/services/limits.py): a start
# or resume past it is refused, naming the runs that hold the places.
CONCORD_STUDY_MAX_ACTIVE_RUNS: int = env.int("CONCORD_STUDY_MAX_ACTIVE_RUNS", default=3)
# Seconds a pending call may wait for its message before the reconciler sends another one (and
# then only once the judge queue is empty: see docs/judges.md, "The reconciler").
CONCORD_JUDGE_PENDING_GRACE_SECONDS: int = env.int(
    "CONCORD_JUDGE_PENDING_GRACE_SECONDS", default=1800
)
# Seconds a received reply is kept in the journal (Redis, REDIS_URL) in case its database write
# does not land; the entry is deleted as soon as it does. It must outlast any database outage
# the replies should survive (docs/judges.md, "The journal of received replies").
CONCORD_JUDGE_JOURNAL_SECONDS: int = env.int("CONCORD_JUDGE_JOURNAL_SECONDS", default=7 * 86400)
CONCORD_JUDGE_MAX_ATTEMPTS: int = env.int("CONCORD_JUDGE_MAX_ATTEMPTS", default=6)
CONCORD_JUDGE_BACKOFF_BASE_SECONDS: float = env.float(
    "CONCORD_JUDGE_BACKOFF_BASE_SECONDS", default=2.0
)
# Length of the rate-limit window; a judge's requests_per_minute and tokens_per_minute are
# enforced per window of this many seconds (60 in production; tests shorten it).
CONCORD_JUDGE_RATE_WINDOW_SECONDS: float = env.float(
    "CONCORD_JUDGE_RATE_WINDOW_SECONDS", default=60.0
)
# A running run with no call finished for this long says so on its page (no worker?).
CONCORD_JUDGE_STALL_SECONDS: float = env.float("CONCORD_JUDGE_STALL_SECONDS", default=120.0)
CONCORD_JUDGE_RECONCILE_SECONDS: float = env.float("CONCORD_JUDGE_RECONCILE_SECONDS", default=60.0)
CONCORD_JUDGE_FAN_OUT_CHUNK: int = env.int("CONCORD_JUDGE_FAN_OUT_CHUNK", default=500)
# Calls per message of a run's fan-out: a worker thread loads, claims and records them with one
# statement each and sends their requests together (each with its own deadline), so a worker
# has up to threads x this many requests in flight (docs/benchmarks.md, judge pipeline).
CONCORD_JUDGE_CALL_BATCH: int = env.int("CONCORD_JUDGE_CALL_BATCH", default=8)

# Each task names its queue where it is made (core.tasks.task); the router reads it there.
CELERY_TASK_ROUTES = ("core.tasks.task_route",)
CELERY_BEAT_SCHEDULE = {
    "judges-pl-trainings-reconcile": {
        "task": "judges.pl_trainings_reconcile",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    "judges-pl-runs-reconcile": {
        "task": "judges.pl_runs_reconcile",
        "schedule": CONCORD_REWARD_RECONCILE_SECONDS,
        "options": {"expires": CONCORD_REWARD_RECONCILE_SECONDS},
    },
    "judges-calls-reconcile": {
        "task": "judges.calls_reconcile",
        "schedule": CONCORD_JUDGE_RECONCILE_SECONDS,
        # A reconciler message nobody took before the next one is due is dropped, so copies
        # never pile up behind a stopped worker and run at once.
        "options": {"expires": CONCORD_JUDGE_RECONCILE_SECONDS},
    },
    # Reservations stop counting at their expiry anyway; this brings their stored status in line.
    "annotation-assignments-expire": {"task": "annotation.assignments_expire", "schedule": 60.0},
    # Participants let in unverified while Prolific could not answer: verified, or excluded.
    # Bonus batches on their way through Prolific's API (each pays at most once).
    "annotation-prolific-bonus-batches-run": {
        "task": "annotation.prolific_bonus_batches_run",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    # Prolific's submission statuses read into Concord (decisions taken on Prolific's site).
    "annotation-prolific-submissions-reconcile": {
        "task": "annotation.prolific_submissions_reconcile",
        "schedule": 300.0,
        "options": {"expires": 300.0},
    },
    "annotation-prolific-unverified-recheck": {
        "task": "annotation.prolific_unverified_recheck",
        "schedule": 300.0,
        "options": {"expires": 300.0},
    },
    # Active selection: the pairs' priorities of live active studies, with fresh draw keys.
    "leaderboard-pair-priorities-refresh": {
        "task": "leaderboard.pair_priorities_refresh",
        "schedule": 300.0,
        "options": {"expires": 300.0},
    },
    # Lost export jobs queued again, old export files deleted.
    "leaderboard-exports-maintain": {"task": "leaderboard.exports_maintain", "schedule": 300.0},
}
