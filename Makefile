# `make demo` and `make test` are the two commands a newcomer needs (README).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test test-fast test-slow lint typecheck stubs check clean browser bench

$(STAMP): pyproject.toml setup.py constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/shardlab demo

# Everything CI runs (.ci/run): the linter, the type checker, then every tier of tests but `slow`
# (one renders the HTML handout in Chromium: `browser` installs Debian's when it is missing and we are root).
# Two pytest-xdist workers, a test file each at a time (--dist loadfile: a file's tests in order on one
# worker, its module fixtures made once): most tests wait (hangs, timeouts, whole gradings in
# subprocesses), so two overlap well, 10-13 min in one process -> 7-9 min. A test marked `machine`
# checks the machine itself and runs with the other worker held back by a lock (tests/conftest.py says how
# and why); `pytest -m "not slow"` alone still runs the same tests in one process.
test: lint typecheck browser
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

# The pure tier only (no sandbox, no gloo, no subprocess): seconds, for the edit-test loop. Two
# pytest-xdist workers, a test file each at a time (--dist loadfile: a file's module fixtures are
# made once); the tier passes with or without them (`pytest -m pure` alone runs it in one process).
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set (on the shared machine it is):
# without tests/__pycache__ each worker redoes pytest's assertion rewriting of every test file
# (0.9 CPU-seconds a worker, 0.8 s of the tier's wall time).
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m pure -n 2 --dist loadfile

# The slow tier only (minutes): the starter kit installed in a fresh venv by its README's line, its
# pytest and its notebook run there (pip reaches the package registry; torch is the local CPU build).
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# Speed, memory and batch throughput against import torch, idle and under load (bench/grading.py):
# several minutes; writes shardlab-out/bench/performance.md and phases.png and docs/performance.md's table.
bench: $(STAMP)
	$(BIN)/python bench/grading.py --readme

browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && { timeout 600 apt-get install -y --no-install-recommends chromium >/dev/null || \
	    { apt-get update -qq && timeout 600 apt-get install -y --no-install-recommends chromium >/dev/null; }; }; } || \
	  { echo "make browser: Chromium is missing; install it (apt-get install chromium) and rerun"; exit 1; }

lint: $(STAMP)
	$(BIN)/ruff check .

# mypy on the installed packages, shardlab.<folder> ([tool.mypy] in pyproject.toml: which, and how
# strict). The editable install maps each folder to its name through setuptools' import hook, which
# mypy cannot follow; this folder of directory links, .venv/typecheck/shardlab/<folder>, lays out the
# same names on disk for mypy_path, and a new file in a folder is seen without reinstalling.
typecheck: $(STAMP)
	@mkdir -p $(VENV)/typecheck/shardlab
	@for d in autograder reference solutions assignments templates; do \
	  ln -sfn ../../../$$d $(VENV)/typecheck/shardlab/$$d; done
	$(BIN)/mypy

# Regenerate assignments/ (student stubs) from solutions/.
stubs: $(STAMP)
	$(BIN)/shardlab stubs

check: $(STAMP)
	$(BIN)/shardlab check

clean:
	rm -rf $(VENV) build *.egg-info shardlab-out
