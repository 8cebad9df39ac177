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

import gc
import os
import shutil

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.sandbox.gloo.seeds import POOL_SIZE_ENV
from shardlab.reference.config import load_config

TIERS = ("pure", "sandbox", "platform", "slow")

# `shardlab warm` fills the cache once per key of the data seed pool (8 keys by default): the tests
# make pools of 2, in every grader they start too, for time. tests/test_sandbox_seed_pool.py checks
# the default pool itself.
os.environ.setdefault(POOL_SIZE_ENV, "2")
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
