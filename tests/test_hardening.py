"""The sandbox's walls, tested from the inside with hostile student modules.

These need the jail (root + namespaces), which CI and Gradescope have; where
it is unavailable the test says so by failing, not by skipping silently."""
import os
import subprocess

import pytest

from autograder import jail
from autograder.parts import Call
from autograder.sandbox import Limits, run_calls
from autograder.stubs import SOLUTIONS

FAST = Limits(call_seconds=3.0, import_seconds=30.0)
REPO_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "reference", "memory.py")

HOSTILE = f'''
import os, socket, subprocess, sys

def interfaces():
    return sorted(name for _, name in socket.if_nameindex())

def read_answer_key():
    out = []
    for path in [{REPO_FILE!r}, {os.path.join(str(SOLUTIONS), "memory.py")!r}]:
        try:
            out.append(len(open(path).read()))
        except OSError as exc:
            out.append(type(exc).__name__)
    return out

def write_grader(path):
    try:
        with open(path, "a") as f:
            f.write("pwned")
        return "wrote"
    except OSError as exc:
        return type(exc).__name__

def detach(marker):
    # a daemon in a new session, double-forked, that would outlive a process-group kill
    subprocess.Popen(["sh", "-c", f"sleep 300 # {{marker}}"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "301", marker])
        os._exit(0)
    return "started"

def whoami():
    return os.getuid()
'''


@pytest.fixture
def hostile(tmp_path):
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "hostile.py").write_text(HOSTILE)
    return str(tmp_path)


def _ask(root, function, **args):
    run = run_calls(root, [Call("hostile", function, args)], FAST)
    out = run.outcomes[0]
    assert out.error is None, out.error
    return out.value


def test_jail_is_available_here():
    assert jail.available(), "the hardened sandbox needs root and working namespaces (unshare)"


def test_student_code_runs_unprivileged(hostile):
    assert _ask(hostile, "whoami") == 65534


def test_only_loopback_is_visible(hostile):
    # inspects interfaces only: nothing is sent anywhere
    assert _ask(hostile, "interfaces") == ["lo"]


def test_answer_key_is_unreadable_and_grader_unwritable(hostile, tmp_path_factory):
    assert _ask(hostile, "read_answer_key") == ["FileNotFoundError", "FileNotFoundError"]
    # a file of the grader's (root's, mode 0644) in a folder anyone may enter
    folder = tmp_path_factory.mktemp("grader-state")
    folder.chmod(0o755)
    state = folder / "state.txt"
    state.write_text("ok")
    state.chmod(0o644)
    assert _ask(hostile, "write_grader", path=str(state)) == "PermissionError"
    assert state.read_text() == "ok"


def test_detached_processes_do_not_survive(hostile):
    marker = f"shardlab-detach-{os.getpid()}"
    assert _ask(hostile, "detach", marker=marker) == "started"
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps, [line for line in ps.splitlines() if marker in line]


def test_gloo_ranks_are_jailed_too(hostile):
    from autograder.gloo.probe import run_gloo
    marker = f"shardlab-detach-gloo-{os.getpid()}"
    calls = [Call("hostile", "run_function", {"world_size": 2, "function": f, "args": a})
             for f, a in (("whoami", []), ("interfaces", []), ("read_answer_key", []), ("detach", [marker]))]
    run = run_gloo(hostile, calls)
    values = [[rank["value"] for rank in out.value] for out in run.outcomes]
    assert values[0] == [65534, 65534]
    assert values[1] == [["lo"], ["lo"]]
    assert values[2] == [["FileNotFoundError", "FileNotFoundError"]] * 2
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps
