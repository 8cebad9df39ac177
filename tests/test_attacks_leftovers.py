"""Nothing left behind by a grader killed mid-grading (issue 30, item 6).

Batch grading kills a grader that runs past its timeout with SIGKILL: the
grader runs no clean-up then. The grader is a fork of one of the batch's
grading services (`platforms.grading_service`), which kills and sweeps it. The attack makes that happen and tries to
outlive it: a submission whose function never returns, and which forks a
process that resets its parent-death signal, leaves the session and renames
itself. After the kill, no process of it, no temporary folder, no
shared-memory file and no cgroup may be left (`sandbox.leftovers`). A
grader killed by anything else is swept by the next grader's start.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shardlab.autograder.platforms import batch
from shardlab.autograder.platforms.grading_service import GradingService, ServiceError
from shardlab.autograder.sandbox import jail, leftovers
from shardlab.autograder.sandbox.jail import Cgroup

# `machine`: what is checked (no file of /dev/shm, no dead grader's cgroup) is the machine's, where a test
# on another xdist worker would show; these tests run with no other beside them (tests/conftest.py)
pytestmark = [pytest.mark.platform, pytest.mark.machine]

NAME = "leftoverQ30"          # the comm the student's processes give themselves

CLINGS = f'''

import ctypes as _ctypes, os as _os, time as _time


def _named():
    _ctypes.CDLL(None).prctl(15, b"{NAME}", 0, 0, 0)        # PR_SET_NAME


def param_count(d_model, d_ff, num_blocks):
    _named()
    if _os.fork() == 0:                                    # a child that will not die with its parent
        _ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)            # PR_SET_PDEATHSIG = 0
        _os.setsid()
        _named()
        _time.sleep(3600)
        _os._exit(0)
    _time.sleep(3600)


def _clinging(fn):
    def clings(*args, **kwargs):
        return param_count(0, 0, 0)
    return clings


# every other function clings too: each case group's first call hangs its 5 s, so the grading runs far
# longer than the batch's timeout here
for _name, _fn in list(globals().items()):
    if callable(_fn) and not _name.startswith("_") and _name != "param_count" \
            and getattr(_fn, "__module__", None) == __name__:
        globals()[_name] = _clinging(_fn)
'''


def _named_processes() -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == NAME:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    out.append(int(pid))
        except OSError:
            continue
    return out


def _dead_graders_cgroups() -> set[str]:
    """Cgroups named for a grader (shardlab-<pid>-...) whose process is gone (a grader alive
    elsewhere on the machine keeps its own)."""
    names = set()
    for group in Cgroup.left_by(None):
        for d in group.dirs.values():
            pid = int(os.path.basename(d).split("-")[1])
            if not Path(f"/proc/{pid}").exists():
                names.add(d)
    return names


@pytest.fixture
def private_tmp(short_tmp, monkeypatch):
    """A temporary folder of its own for the graders (and for the sweep, which looks in the same);
    a short path, for the gloo groups' sockets (conftest.py, `short_tmp`)."""
    folder = short_tmp
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def clinging_submission(submission):
    return submission(memory=(Path(batch.content.folder("solutions")) / "memory.py").read_text() + CLINGS)


def _assert_nothing_left(tmp: Path, shm_before: set[str], cgroups_before: set[str]) -> None:
    time.sleep(0.2)                                 # SIGKILL delivery is asynchronous
    assert _named_processes() == [], "a student process outlived its grader"
    assert sorted(p.name for p in tmp.iterdir()) == [], "a temporary folder outlived its grader"
    assert set(os.listdir("/dev/shm")) <= shm_before, "a shared-memory file outlived its grader"
    if jail.walls().cgroup:
        assert _dead_graders_cgroups() <= cgroups_before, "a cgroup outlived its grader"


def _until_student_code_runs(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not _named_processes() and time.monotonic() < deadline:     # the attack under way
        time.sleep(0.2)
    assert _named_processes(), "the student's code never ran"


@contextlib.contextmanager
def _grading_under_way(submission: Path, seconds: float):
    """A service grading `submission` in a thread, once its student code runs: (service, future)."""
    service = GradingService()
    try:
        with ThreadPoolExecutor(1) as pool:
            graded = pool.submit(batch.grade_supervised, str(submission), None, service)
            deadline = time.monotonic() + seconds
            while not _named_processes() and time.monotonic() < deadline:     # the attack under way
                time.sleep(0.2)
            assert _named_processes(), "the student's code never ran"
            yield service, graded
    finally:
        service.close()


@pytest.mark.timeout(300)
def test_a_grader_killed_by_the_batch_timeout_leaves_nothing(private_tmp, clinging_submission, monkeypatch):
    shm_before, cgroups_before = set(os.listdir("/dev/shm")), _dead_graders_cgroups()
    monkeypatch.setattr(batch, "grade_timeout", lambda config_path: 25)
    with _grading_under_way(clinging_submission, 25) as (service, graded):
        result = graded.result()
        assert result["status"] == "error" and "longer than 25 s" in result["error"], result
        _assert_nothing_left(private_tmp, shm_before, cgroups_before)
        # the service lives on, and its next grading is a fresh fork
        again = batch.grade_supervised(str(private_tmp / "missing"), None, service)
        assert again["status"] == "error" and "no such file or folder" in again["error"], again


@pytest.mark.timeout(300)
def test_a_batch_stopped_mid_grading_leaves_nothing(private_tmp, clinging_submission):
    """Ctrl-C in batch closes its services (SIGTERM): each kills and sweeps its grading under way."""
    shm_before, cgroups_before = set(os.listdir("/dev/shm")), _dead_graders_cgroups()
    with _grading_under_way(clinging_submission, 120) as (service, graded):
        service.close()
        with pytest.raises(ServiceError):
            graded.result()
    _assert_nothing_left(private_tmp, shm_before, cgroups_before)


@pytest.mark.timeout(300)
def test_a_service_killed_mid_grading_is_swept_by_the_next_grader(private_tmp, clinging_submission):
    """SIGKILL to the service: its grader dies by its parent-death signal, the next grader's start sweeps."""
    shm_before, cgroups_before = set(os.listdir("/dev/shm")), _dead_graders_cgroups()
    with _grading_under_way(clinging_submission, 120) as (service, graded):
        os.killpg(service.proc.pid, signal.SIGKILL)
        with pytest.raises(ServiceError):
            graded.result()
    time.sleep(0.5)                                 # the grader's parent-death signal
    leftovers.sweep_dead()                          # what the next grader does first (`grading.grade_path`)
    _assert_nothing_left(private_tmp, shm_before, cgroups_before)


@pytest.mark.timeout(300)
def test_a_grader_killed_otherwise_is_swept_by_the_next(private_tmp, clinging_submission):
    shm_before, cgroups_before = set(os.listdir("/dev/shm")), _dead_graders_cgroups()
    grader = subprocess.Popen([sys.executable, "-m", "shardlab.autograder.cli", "grade", str(clinging_submission),
                               "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 120
    while not _named_processes() and time.monotonic() < deadline:     # until student code runs
        time.sleep(0.2)
    assert _named_processes(), "the student's code never ran"
    os.kill(grader.pid, signal.SIGKILL)
    grader.wait()
    time.sleep(0.2)
    left = sorted(p.name for p in private_tmp.iterdir())
    assert left and all(name.startswith(f"shardlab-{grader.pid}-") for name in left), left   # the attack's effect
    leftovers.sweep_dead()                          # what the next grader does first (`grading.grade_path`)
    _assert_nothing_left(private_tmp, shm_before, cgroups_before)


@pytest.mark.timeout(120)
def test_a_dead_graders_nested_cgroup_is_swept_and_costs_the_next_grader_no_wait(monkeypatch):
    """A grader that ran inside another grader's sandbox cgroup made its own cgroups under it;
    both dead, the parent cannot be removed before its child. The sweep removes both, without
    waiting out its retries (it once spent 3 s of every later grading's start failing on one)."""
    if not jail.walls().cgroup:
        pytest.skip("no per-sandbox cgroups on this machine")
    dead = []
    for _ in range(2):
        child = subprocess.Popen(["true"])
        child.wait()
        dead.append(child.pid)
    ours = Cgroup.create(memory_bytes=1 << 30)              # where a grader's cgroups go, per hierarchy
    assert ours is not None
    made = {}
    for controller, d in ours.dirs.items():
        parent = os.path.join(os.path.dirname(d), f"shardlab-{dead[0]}-{os.urandom(4).hex()}")
        os.mkdir(parent)                                       # the dead grader's
        os.mkdir(os.path.join(parent, f"shardlab-{dead[1]}-{os.urandom(4).hex()}"))
        made[controller] = parent
    ours.remove()
    sleeps = []
    monkeypatch.setattr(jail.time, "sleep", lambda s: sleeps.append(s))
    leftovers.sweep_dead()
    assert not [d for d in made.values() if os.path.exists(d)], "a nested cgroup outlived the sweep"
    assert sum(sleeps) < 0.1, f"the sweep waited {sum(sleeps):.2f} s on cgroups it could remove at once"
