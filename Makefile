# Parley: `make run` installs .venv (with the `parley` command) and serves HTTPS on :8443; `make test` runs the whole suite
# on SQLite, `make test-postgres` runs it again on a throwaway PostgreSQL 15 cluster (needs the postgresql-15 package).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test test-postgres install tools lock lock-check lint clean bench faults chromium screenshots test-ai

$(BIN)/python:
	$(PY) -m venv $(VENV)

# .venv gets the locked set (requirements/, docs/dependencies.md): the runtime pins plus the test and lint tools, each
# file checked against its hashes; then Parley itself without resolving again. `pip install -e .` works without them.
$(STAMP): setup.cfg pyproject.toml requirements/runtime.txt requirements/dev.txt | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --require-hashes -r requirements/dev.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# Tools that pin libraries Parley uses (sslyze: cryptography<47) live in their own venv, never in .venv.
TOOLS_VENV := .venv-tools
TOOLS_STAMP := $(TOOLS_VENV)/.installed
$(TOOLS_STAMP): requirements/tools.txt
	test -x $(TOOLS_VENV)/bin/python || $(PY) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/pip install -q --require-hashes -r requirements/tools.txt
	touch $(TOOLS_STAMP)

tools: $(TOOLS_STAMP)

# Regenerates the three lock files from setup.cfg and requirements/tools.in (newest versions within the bounds;
# UPGRADE="--upgrade-package NAME" or "--upgrade"; by default uv keeps the pins already in the files).
# `make lock-check` (in .ci/run) fails when a lock no longer matches its inputs, without reaching any index.
UPGRADE ?=
UV_COMPILE = UV_CUSTOM_COMPILE_COMMAND="make lock" $(TOOLS_VENV)/bin/uv pip compile -q --generate-hashes \
  --python-version 3.11 $(UPGRADE)
lock: $(TOOLS_STAMP)
	$(UV_COMPILE) setup.cfg -o requirements/runtime.txt
	$(UV_COMPILE) setup.cfg --extra test --extra lint -c requirements/runtime.txt -o requirements/dev.txt
	$(UV_COMPILE) requirements/tools.in -o requirements/tools.txt
	$(MAKE) lock-check

lock-check: $(STAMP)
	$(BIN)/python scripts/check_lock.py

# ruff over the tree, mypy over common/, storage/ and services/ (both configured in pyproject.toml).
lint: $(STAMP)
	@test -x $(BIN)/ruff -a -x $(BIN)/mypy || $(BIN)/pip install -q -e '.[test,lint]'
	$(BIN)/ruff check .
	$(BIN)/mypy

run: $(STAMP)
	$(BIN)/parley serve $(ARGS)

# pytest-xdist workers: 3 on 2 cores pays, since many tests wait on a server process, a browser or a socket
# (docs/testing.md). WORKERS=0 runs in this process (for pdb, or one quick file).
# --dist worksteal: each worker starts with its share of the collection, and one that runs out takes tests from the
# end of another's, so no worker idles while another still has a queue (the same clone's SQLite half: 396 s with
# --dist load --maxschedchunk 16, 310 s with worksteal; docs/testing.md). The long modules still run first
# (tests/conftest.py RUN_FIRST).
WORKERS ?= 3
XDIST = $(if $(filter 0,$(WORKERS)),-p no:xdist,-n $(WORKERS) --dist worksteal)

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): without it every xdist
# worker of both halves, and every server and CLI process a test starts, compiles the sources and rewrites the
# test modules' asserts again (~16 s of CPU per worker's collection alone; docs/testing.md).
KEEP_BYTECODE = -u PYTHONDONTWRITEBYTECODE

test: $(STAMP) $(TOOLS_STAMP) chromium
	env -u PARLEY_TEST_DATABASE_URL $(KEEP_BYTECODE) PARLEY_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest $(XDIST) $(ARGS)

# The same suite with PARLEY_TEST_DATABASE_URL set: each test gets a fresh database in a cluster started for this run
# (initdb + pg_ctl in a temp directory, Unix socket only), stopped and deleted at the end (scripts/with_postgres.py).
test-postgres: $(STAMP) $(TOOLS_STAMP) chromium
	env $(KEEP_BYTECODE) PARLEY_CHROMIUM=$(CHROMIUM) $(BIN)/python scripts/with_postgres.py $(BIN)/python -m pytest $(XDIST) $(ARGS)

# The UI tests drive Debian's Chromium through Playwright (its own browser download does not work offline).
# A Chromium (or Chrome) installed elsewhere: make test CHROMIUM=/path/to/chromium (then nothing is installed).
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@test -x $(CHROMIUM) || ($(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

# The bot on a real small model (issue 22): installs llama-cpp-python[server] (compiles llama.cpp: minutes) and
# Gemma 3 270M if missing, assembles the model under .cache/models/, checks that the build writes a token (a native
# build that crashes is rebuilt without AVX-512/AMX: docs/guide.md#bot-on-a-local-model), and runs the end-to-end
# tests against llama_cpp.server (tests/test_bot_real_model.py; skipped by `make test`). Idempotent.
test-ai: $(STAMP) chromium
	$(BIN)/python scripts/local_model.py install
	PARLEY_CHROMIUM=$(CHROMIUM) PARLEY_AI_MODEL=$$($(BIN)/python scripts/local_model.py path) \
	  $(BIN)/python -m pytest -v -s tests/test_bot_real_model.py $(ARGS)

# Benchmarks (bench/README.md): wrk from Debian, py-spy for the profile; ~10 minutes on 2 cores. Dovecot from Debian
# for the email scenarios (tests/mail_server.py DovecotServer runs its own on a free port in a temporary directory):
# the system service the package starts is stopped and not started at boot, as it would only hold memory and ports
# 143/993 (a Dovecot installed before is left alone).
bench: $(STAMP)
	command -v wrk >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk)
	command -v dovecot >/dev/null || test -x /usr/sbin/dovecot || ( (apt-get update -q \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -q dovecot-imapd) \
	  && (systemctl disable --now dovecot 2>/dev/null || service dovecot stop 2>/dev/null || true))
	test -x $(BIN)/py-spy || $(BIN)/pip install -q py-spy || echo "py-spy unavailable: the profile is skipped"
	$(BIN)/python bench/run.py $(ARGS)

# The UI's pages as PNGs in docs/screenshots/ (scripts/screenshots.py lists them), from a server with demo data.
screenshots: $(STAMP) chromium
	PARLEY_CHROMIUM=$(CHROMIUM) $(BIN)/python scripts/screenshots.py $(ARGS)

# Fault tests with larger counts than the CI-sized run inside `make test`.
PARLEY_FAULT_SCALE ?= 10
# The deep fuzz too: schemathesis with fresh random examples (HYPOTHESIS_PROFILE=deep), 200 an operation.
faults: $(STAMP)
	PARLEY_FAULT_SCALE=$(PARLEY_FAULT_SCALE) HYPOTHESIS_PROFILE=deep PARLEY_FUZZ_EXAMPLES=200 \
	  $(BIN)/python -m pytest -v tests/test_faults.py tests/test_limits.py tests/test_openapi.py $(ARGS)

clean:
	rm -rf $(VENV) $(TOOLS_VENV) build *.egg-info .pytest_cache
