export DATABASE_URL=postgres://postgres@127.0.0.1:5432/concord_lead
export CELERY_BROKER_URL=redis://127.0.0.1:6389/14 REDIS_URL=redis://127.0.0.1:6389/15 CACHE_URL=redis://127.0.0.1:6389/13
