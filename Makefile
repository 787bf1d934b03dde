# Two commands for a fresh machine: `make test` and `make sandbox`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: test sandbox

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the dependencies change.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest

sandbox: $(STAMP)
	$(BIN)/rltui --sandbox
