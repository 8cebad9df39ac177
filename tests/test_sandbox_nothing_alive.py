"""Nothing alive when a grading returns (issue 44), on a loaded machine.

On a machine at load 15 to 46, `assert_nothing_left` once found ranks of a
finished grading still alive: SIGKILL had been sent, not yet delivered, and
the grader had returned. Now a sandbox returns only once every process of its
session is gone (`leftovers.kill_session`, `process.kill_group`), whether it
killed them or they ended, and a cgroup's kill waits for it to empty.

Each test runs beside a CPU hog (busy loops, started and killed here by
pid) and checks at once, with no grace: a student process that forked a
child which outlives it (in the worker's session, where no cgroup is: a
non-root grader behind Landlock), and every process of a gloo grading.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from helpers import alive_in

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox import jail
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.process import Limits, run_calls

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(600)]

LINGERER = '''
import os, signal, time

def leave_a_child():
    """A child that ignores SIGTERM and outlives this call, in the same session; its pid."""
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(0.1)
    return pid

def run_as_a_rank():
    return leave_a_child()
'''
HOGS = 4                # busy loops on a 2-core machine: a load of 4 beyond whatever else runs


@pytest.fixture
def cpu_hog():
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    yield
    for hog in hogs:
        os.kill(hog.pid, signal.SIGKILL)
        hog.wait()


@pytest.fixture
def lingerer(tmp_path):
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "linger.py").write_text(LINGERER)
    return str(tmp_path)


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_workers_child_is_gone_when_the_sandbox_returns(lingerer, cpu_hog, monkeypatch):
    """No cgroup (as a non-root grader has none): only the grader's own kill reaches the child."""
    monkeypatch.setattr(jail.Cgroup, "create", classmethod(lambda cls, *a, **k: None))
    run = run_calls(lingerer, [Call("linger", "leave_a_child", {})], Limits(call_seconds=60, import_seconds=60))
    [outcome] = run.outcomes
    assert outcome.error is None and isinstance(outcome.value, int), outcome
    if jail.walls().namespaces:
        return                                    # its pid is the PID namespace's, and the namespace is gone
    assert not _alive(outcome.value), f"the worker's child {outcome.value} outlived the sandbox"


def test_nothing_of_a_gloo_grading_is_alive_when_it_returns(lingerer, cpu_hog, sessions):
    call = Call("linger", "run_function", {"world_size": 2, "function": "run_as_a_rank", "args": []})
    run = run_gloo(lingerer, [call], Limits(import_seconds=60), gloo=GlooLimits(scenario_seconds=120))
    assert run.outcomes[0].error is None, run.outcomes[0].error
    assert sessions and alive_in(set(sessions)) == []          # at once: no grace
