# `make demo` and `make test` are the two commands a newcomer needs (README).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test test-fast lint stubs check clean

$(STAMP): pyproject.toml setup.py constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/shardlab demo

# Everything CI runs (.ci/run): the linter, then every tier of tests.
test: lint
	$(BIN)/python -m pytest -q

# The pure tier only (no sandbox, no gloo, no subprocess): seconds, for the edit-test loop.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m pure

lint: $(STAMP)
	$(BIN)/ruff check .

# Regenerate assignments/ (student stubs) from solutions/.
stubs: $(STAMP)
	$(BIN)/shardlab stubs

check: $(STAMP)
	$(BIN)/shardlab check

clean:
	rm -rf $(VENV) build *.egg-info shardlab-out
