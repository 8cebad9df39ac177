# `make demo` and `make test` are the two commands a newcomer needs (README).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test stubs check clean

$(STAMP): pyproject.toml setup.py constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/shardlab demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Regenerate assignments/ (student stubs) from solutions/.
stubs: $(STAMP)
	$(BIN)/shardlab stubs

check: $(STAMP)
	$(BIN)/shardlab check

clean:
	rm -rf $(VENV) build *.egg-info shardlab-out
