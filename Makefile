# Parley: `make run` serves HTTPS on :8443; `make test` runs the whole suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python server.py serve $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
