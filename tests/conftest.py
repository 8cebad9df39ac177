"""Shared fixtures, and the rules every test file follows.

File names: `test_<concern>_<subject>.py`, the concern being where the code
under test lives: `reference` (reference/ against solutions/ and real runs),
`question` (one question graded end to end), `kit` (the starter kit's code:
its launcher, timelines, toy models, the bucket experiment), `engine`,
`sandbox`, `publish`, `platforms`, `package` (the package's structure and
the layers), or `attacks` (a
student trying to break a wall, docs/trust.md); the CLI is one module, so
its file is plain `test_cli.py`.

Tiers: every test carries exactly one tier marker, `pure` (no sandbox, no
gloo, no subprocess: `make test-fast`, seconds), `sandbox` (student code in
jailed processes or gloo ranks, real torch runs), `platform` (otter, the
Gradescope zip, the CLI in a subprocess, batch grading) or `slow` (minutes:
pip installs into a fresh venv, as a student's first set-up does; left out
of `make test` and CI by `-m "not slow"`, run by `make test-slow`); usually
as a file's `pytestmark`. A test without one, or with two, fails collection.

Fixtures used by more than one file are defined here, once; a fixture of one
file stays in it, under a name no other fixture has. Helpers that are not
fixtures are in helpers.py (`from helpers import ...`: pyproject.toml puts
tests/ on the path); test files never import from each other.
"""
from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.sandbox.gloo.seeds import POOL_SIZE_ENV
from shardlab.reference.config import load_config

from helpers import scale_timeout

TIERS = ("pure", "sandbox", "platform", "slow")

# `shardlab warm` fills the cache once per key of the data seed pool (8 keys by default): the tests
# make pools of 2, in every grader they start too, for time. tests/test_sandbox_seed_pool.py checks
# the default pool itself.
os.environ.setdefault(POOL_SIZE_ENV, "2")
# this run's own options (read already: say `--durations=30` to profile the suite) are not the kit's:
# the pytest runs tests start in a starter kit, or that its notebook starts, parse their own
os.environ.pop("PYTEST_ADDOPTS", None)
SOLUTIONS = content.folder("solutions")


def pytest_collection_modifyitems(config, items):
    wrong = []
    for item in items:
        tiers = {m.name for m in item.iter_markers() if m.name in TIERS}
        if len(tiers) != 1:
            wrong.append(f"{item.nodeid}: tiers {sorted(tiers) or 'none'}")
    if wrong:
        raise pytest.UsageError(f"every test needs exactly one tier marker ({', '.join(TIERS)}); "
                                "see tests/conftest.py:\n  " + "\n  ".join(wrong))


# Garbage collection. A full collection walks every tracked object, and the live ones only grow
# (torch, matplotlib, otter, jinja templates, caches): an eighth of the pure tier's CPU went to
# walking objects that stay alive to the end. So the collector is off while the test files are
# imported (imports make next to no garbage), and the objects alive once the tests are collected,
# and again once each test file is done (its module fixtures torn down and its garbage collected
# first), are frozen (gc.freeze: left out of later collections and of gc.get_objects; reference
# counting still frees them): a collection then walks what the current file made. No test looks
# at the collector in this process (the attack scripts that call gc.get_objects run sandboxed); a
# frozen object later left in a reference cycle alone stays in memory (test runs are short).
@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    gc.disable()
    try:
        return (yield)
    finally:
        gc.enable()
        gc.collect()
        gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()
    return result


# Two workers, one machine. `make test` runs the suite on two pytest-xdist workers, a test file each at
# a time (`--dist loadfile`: a file's tests run in order on one worker, its module fixtures made once),
# so any test may run beside any test of another file. Nearly every test keeps to what is its own: its
# tmp_path (graders' folders are `shardlab-<pid>-...`, and a grader sweeps only dead pids'), its own
# processes (markers with its pid, sessions of its fork servers, its own descendants), its own cgroups
# (named for their grader's pid), caches written atomically (`once_per_machine`, the seed pool:
# the first writer wins), FileStores not ports, private mount namespaces. A test marked `machine`
# checks the machine itself, where another test's processes would show (tests/test_attacks_leftovers.py:
# no shared-memory file of /dev/shm and no dead grader's cgroup left anywhere after a grader is killed),
# so it needs the machine to itself: every test takes a lock on one file of the session's temporary
# folder (beside the workers' own), shared by an ordinary test and exclusive for a `machine` one, from
# before its set-up to after its teardown, outside pytest-timeout's clock. A turnstile keeps the
# exclusive waiter from starving: every test passes an exclusive `gate` lock first; the `machine` test
# holds it while it waits for the others' shared locks and while it runs, so no new test starts beside
# it. In one process (no xdist) nothing is locked. The cost: a `machine` test runs with the other worker
# idle (about 30 s of the suite), so mark only what cannot be made to look at its own things alone.
MACHINE = "machine"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MACHINE}: needs the machine to itself under pytest-xdist "
                                       "(no other worker's test runs beside it; tests/conftest.py)")


class _MachineLock:
    """The session's shared/exclusive test lock (flock), with its turnstile."""

    def __init__(self, folder: Path):
        self.gate = open(folder / "machine.gate", "a")          # both held open for the session
        self.lock = open(folder / "machine.lock", "a")

    @contextlib.contextmanager
    def held(self, alone: bool):
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(self.gate, fcntl.LOCK_UN)


_machine_lock: _MachineLock | None = None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    global _machine_lock
    scale_timeout(item)          # a hang guard that holds on a loaded machine (helpers.scale_timeout)
    if not hasattr(item.config, "workerinput"):               # one process: nothing runs beside
        return (yield)
    if _machine_lock is None:                                  # a worker's basetemp is <session's>/<worker id>
        _machine_lock = _MachineLock(Path(item.config.option.basetemp).parent)
    with _machine_lock.held(alone=item.get_closest_marker(MACHINE) is not None):
        return (yield)


@pytest.fixture(scope="session")
def cfg():
    """The shipped course config."""
    return load_config()


@pytest.fixture(scope="session")
def kit_runs(cfg):
    """The starter kit's public runs of the distributed parts (publish/kit_harness.py)."""
    from shardlab.autograder.publish.kit_harness import public_runs
    return public_runs(cfg)


@pytest.fixture(scope="session")
def autograder_zip(tmp_path_factory, cfg):
    """The shipped course's Gradescope autograder.zip (`shardlab build`), built once."""
    from shardlab.autograder.publish.otter_export import build_autograder, config_text   # otter: 1 s to import
    return build_autograder(cfg, config_text(None), tmp_path_factory.mktemp("ag"))


@pytest.fixture
def submission(tmp_path):
    """Build a submission folder: solutions/ copied to assignments/, with
    optional module sources replacing files: `submission(fsdp="...")`."""
    def make(**modules: str):
        shutil.copytree(SOLUTIONS, tmp_path / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
        for name, text in modules.items():
            (tmp_path / "assignments" / f"{name}.py").write_text(text)
        return tmp_path
    return make


@pytest.fixture
def short_tmp():
    """A new empty folder of the test's, with a short path, for the graders' temporary folders when a test
    points tempfile (or TMPDIR) at a folder of its own: a gloo group's socket is made there
    (shardlab-<pid>-g-<random>/ctl.sock), and an AF_UNIX path holds 107 bytes, which tmp_path, under an
    xdist worker's basetemp (/tmp/pytest-of-root/pytest-<n>/popen-gw0/<30 characters of the test name>0/),
    leaves no room for. Named shardlab-test-..., which no grader's sweep takes for a grader's."""
    folder = Path(tempfile.mkdtemp(prefix="shardlab-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def sessions(monkeypatch):
    """Session ids of the gloo fork servers started during the test (ranks
    share their server's session): helpers.assert_nothing_left checks them."""
    import shardlab.autograder.sandbox.gloo.group as group      # torch: only where gloo runs
    started = []
    original = group.ForkServer.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        started.append(self.proc.pid)
    monkeypatch.setattr(group.ForkServer, "__init__", recording)
    return started
