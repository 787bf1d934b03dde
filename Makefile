# Two commands for a fresh machine: `make test` and `make sandbox`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: test test-fast lint sandbox screens chaos bench ray-env

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the dependencies change. One editable install holds both rltui and its
# sandbox (sandbox/, a distribution of its own), both used live from this checkout.
$(STAMP): pyproject.toml sandbox/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# The sandbox's cluster runs the image's Ray 2.46.0, not rltui's (sandbox/rltui_sandbox/images.py): a venv
# of its own with requirements-ray.txt, made afresh (--clear) only when that file changes: about
# a minute and 410 MB. RLTUI_SANDBOX_RAY_ENV points the sandbox at another one.
RAY_VENV  := .venv-ray
RAY_STAMP := $(RAY_VENV)/.installed-stamp

$(RAY_STAMP): requirements-ray.txt
	$(PYTHON) -m venv --clear $(RAY_VENV)
	$(RAY_VENV)/bin/python -m pip install -q --disable-pip-version-check -r requirements-ray.txt
	touch $@

ray-env: $(RAY_STAMP)

# ruff (the whole tree; sandbox/ under its own settings), the layers as import-linter contracts,
# then mypy: rltui strict from the root, the sandbox under sandbox/pyproject.toml's settings.
lint: $(STAMP)
	$(BIN)/python -m ruff check
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m mypy
	cd sandbox && ../$(BIN)/python -m mypy

# The linters first: a lint failure stops here, before the (minutes-long) suite. Three workers
# (pytest-xdist) on two cores: most tests wait on a simulated clock, a Ray head or a terminal,
# not on a core (a clean clone here: 14:14 with three, 17:23 with two).
# tests/conftest.py keeps the tests of one shared process (the sandbox, the demo's Ray head) in
# one worker and a file's tests together, the sandbox's (the longest) first.
WORKERS ?= 3
test: lint ray-env
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30

# The fast loop while changing the engine or the core: the unit and plan tests that need no
# sandbox and no Ray head (marker `slow` off), about 40 s here; docs/testing.md has the rest.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(WORKERS) -m "not slow and not chaos" tests/unit tests/plan

# SIGKILL of up and down at seeded moments under --faults 0.2, and a preemption with no rltui
# running (tests/chaos/test_chaos.py; RLTUI_CHAOS_SEED picks other moments). About 15 minutes.
chaos: $(STAMP) ray-env
	$(BIN)/python -m pytest -m chaos tests/chaos

# The wizard against the local sandbox; env.sh (git-ignored, 0600) starts as the sandbox example.
ENV ?= env.sh
sandbox: $(STAMP) ray-env
	@test -e $(ENV) || (cp assets/sandbox.env.sh $(ENV) && chmod 600 $(ENV) && echo "wrote $(ENV) from assets/sandbox.env.sh")
	$(BIN)/rltui --sandbox --env $(ENV)

# screens/<name>.svg, one per wizard screen, rendered from a live sandbox run (about 2 minutes).
screens: $(STAMP) ray-env
	$(BIN)/python -m rltui.gallery --out screens

# The performance figures, each script's last line `name: value (goal)`; outside
# `make test` (each starts its own sandbox; minutes each).
bench: $(STAMP) ray-env
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done
