#!/usr/bin/env bash
# The demo's Celery worker: every queue, one process, with beat embedded for the reconciler.
# It uses kombu's file-system broker under var/broker (config.settings.demo), so no Redis is
# needed. `make demo` starts it next to runserver; stop it with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
var="${CONCORD_VAR_DIR:-var}"
mkdir -p "$var"
export DJANGO_SETTINGS_MODULE=config.settings.demo
exec .venv/bin/celery -A config worker \
  -Q default,llm_judge,judge_reconcile,reward_model,analysis \
  --pool=solo --loglevel=INFO \
  --beat --schedule="$var/celerybeat-schedule" \
  --without-gossip --without-mingle --without-heartbeat
