# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.installed-runtime
TEST := DJANGO_SETTINGS_MODULE=config.settings.test

.PHONY: demo demo-stop test lint typecheck pytest services venv clean-demo browser bench

# The demo needs only the runtime requirements; the tests add the dev tools (and a browser).
$(RUNTIME): requirements.txt
	@echo "Building $(VENV): the runtime requirements ($$(grep -c '==' requirements.txt) pinned packages, PyTorch among them; a first build takes a few minutes) ..."
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(RUNTIME)
	@echo "$(VENV) has the runtime requirements."

# requirements-audit.txt goes in with --no-deps: the packages that the style-control audit
# compares against (alpaca-eval, arena-rank) pin or ask for versions that clash with ours
# (arena-rank pins numpy 2.3.3, we pin 2.4.6) and for far more than they import; the file pins
# exactly what importing their two modules needs.
$(STAMP): $(RUNTIME) requirements-dev.txt requirements-audit.txt
	@echo "Adding the test tools to $(VENV) ..."
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(BIN)/pip install --quiet --no-deps -r requirements-audit.txt
	touch $(STAMP)

venv: $(STAMP)

## demo: build the environment, start the embedded PostgreSQL and Redis, load the demo study and
## serve it on 127.0.0.1:$(DEMO_PORT) with a Celery worker and beat; Ctrl-C (or `make demo-stop`)
## stops all of it
DEMO_PORT ?= 8000
demo: $(RUNTIME)
	$(BIN)/python scripts/demo.py start --port $(DEMO_PORT)

## demo-stop: stop a demo started in another shell or in the background
demo-stop:
	@if test -x $(BIN)/python; then $(BIN)/python scripts/demo.py stop; \
	  else echo "The demo is not running (no $(VENV))."; fi

## clean-demo: stop the demo and forget its data (database, broker, log-ins)
clean-demo: demo-stop
	rm -rf var/demo var/demo-secret-key var/demo-password-*

## test: build the environment, check PostgreSQL and Redis, then lint, type-check and run pytest
test: $(STAMP) services lint typecheck pytest

# Browser tests drive Debian's Chromium; Playwright never downloads a browser of its own.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

services: $(STAMP)
	$(TEST) $(BIN)/python scripts/check_services.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy .

pytest: $(STAMP) services browser
	$(TEST) $(BIN)/python manage.py check
	$(TEST) $(BIN)/python manage.py makemigrations --check --dry-run
	$(TEST) $(BIN)/pytest

## bench: every performance figure in one table beside its baseline (not part of `make test`).
## QUICK=1 for small sizes on a shared machine; NO_INSTALL=1 skips Label Studio unless already
## installed in var/label-studio-venv. Loopback PostgreSQL and Redis, as for the tests.
bench: $(STAMP) services
	$(TEST) $(BIN)/python benchmarks/run_all.py $(if $(QUICK),--quick,) $(if $(NO_INSTALL),--no-install,)
