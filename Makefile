# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := DJANGO_SETTINGS_MODULE=config.settings.demo
TEST := DJANGO_SETTINGS_MODULE=config.settings.test

.PHONY: demo test lint typecheck pytest services venv clean-demo browser

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

## demo: build the environment, load the demo study into SQLite and serve it on 127.0.0.1:8000
demo: $(STAMP)
	$(DEMO) $(BIN)/python manage.py migrate --noinput
	$(DEMO) $(BIN)/python manage.py demo_setup
	$(DEMO) $(BIN)/python manage.py runserver 127.0.0.1:8000

clean-demo:
	rm -rf var/demo.sqlite3 var/broker

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
