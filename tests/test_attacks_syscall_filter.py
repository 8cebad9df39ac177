"""Attacks on the kernel through system calls a grading never needs
(autograder/sandbox/syscall_filter.py): io_uring, bpf, the keyring,
userfaultfd, perf events, ptrace, other processes' memory, kexec, modules,
namespaces, mounts, swap, reboot, the clocks.

Two halves. In a real sandbox (the plain-call worker and a gloo rank's
student process), every call answers EPERM and the process is under a
seccomp filter. Behind the jail some of those calls would answer EPERM
anyway (no capabilities), so the other half shows that the filter itself is
what answers: a root process with every capability, given the same calls
with the same harmless arguments (null pointers, bad descriptors, bad
flags), gets something else without the filter and EPERM with it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox import jail, syscall_filter
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.process import Limits, run_calls

WALLS = jail.walls()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(syscall_filter.available() is not None,
                                 reason=f"no system-call filter here: {syscall_filter.available()}")]

SIGCHLD = 17
NEWUSER, NEWNS, NEWPID, NEWNET = 0x10000000, 0x00020000, 0x20000000, 0x40000000
# name -> (system call, arguments): harmless even unfiltered as root (null pointers, bad descriptors,
# bad flags, pid 0), but answered by the call itself, not by a capability check
CALLS: dict[str, tuple[str, tuple[int, ...]]] = {
    "io_uring_setup": ("io_uring_setup", (0, 0)),
    "io_uring_enter": ("io_uring_enter", (-1, 0, 0, 0, 0, 0)),
    "io_uring_register": ("io_uring_register", (-1, 0, 0, 0)),
    "bpf": ("bpf", (-1, 0, 0)),
    "userfaultfd": ("userfaultfd", (0,)),
    "perf_event_open": ("perf_event_open", (0, 0, -1, -1, 0)),
    "keyctl": ("keyctl", (-1, 0, 0, 0, 0)),
    "add_key": ("add_key", (0, 0, 0, 0, 0)),
    "request_key": ("request_key", (0, 0, 0, 0)),
    "ptrace": ("ptrace", (16, 0, 0, 0)),                    # PTRACE_ATTACH to pid 0
    "process_vm_readv": ("process_vm_readv", (0, 0, 0, 0, 0, 0)),
    "process_vm_writev": ("process_vm_writev", (0, 0, 0, 0, 0, 0)),
    "kcmp": ("kcmp", (0, 0, -1, 0, 0)),
    "pidfd_getfd": ("pidfd_getfd", (-1, 0, 0)),
    "kexec_load": ("kexec_load", (0, 0, 0, 0xFFFFFFFF)),     # flags no kernel accepts
    "kexec_file_load": ("kexec_file_load", (-1, -1, 0, 0, 0xFFFFFFFF)),
    "init_module": ("init_module", (0, 0, 0)),
    "finit_module": ("finit_module", (-1, 0, 0)),
    "delete_module": ("delete_module", (0, 0)),
    "reboot": ("reboot", (0, 0, 0, 0)),                      # no magic numbers
    "swapon": ("swapon", (0, 0)),
    "swapoff": ("swapoff", (0,)),
    "acct": ("acct", (1,)),                                  # an unmapped address, never NULL (off)
    "quotactl": ("quotactl", (0, 0, 0, 0)),
    "syslog": ("syslog", (-1, 0, 0)),
    "settimeofday": ("settimeofday", (1, 1)),
    "clock_settime": ("clock_settime", (0, 0)),
    "clock_adjtime": ("clock_adjtime", (0, 0)),
    "adjtimex": ("adjtimex", (0,)),
    "unshare": ("unshare", (0,)),
    "setns": ("setns", (-1, 0)),
    "mount": ("mount", (0, 0, 0, 0, 0)),
    "umount2": ("umount2", (0, 0)),
    "pivot_root": ("pivot_root", (0, 0)),
    "chroot": ("chroot", (0,)),
    "fsopen": ("fsopen", (0, 0)),
    "fspick": ("fspick", (-1, 0, 0)),
    "open_tree": ("open_tree", (-1, 0, 0)),
    "move_mount": ("move_mount", (-1, 0, -1, 0, 0)),
    "open_by_handle_at": ("open_by_handle_at", (-1, 0, 0)),
    "clone(CLONE_NEWUSER)": ("clone", (NEWUSER | SIGCHLD, 0, 0, 0, 0)),
    "clone(CLONE_NEWNS)": ("clone", (NEWNS | SIGCHLD, 0, 0, 0, 0)),
    "clone(CLONE_NEWPID)": ("clone", (NEWPID | SIGCHLD, 0, 0, 0, 0)),
    "clone(CLONE_NEWNET)": ("clone", (NEWNET | SIGCHLD, 0, 0, 0, 0)),
}
# the machine-wide calls the brief names, each must be in CALLS
NAMED = ("io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "keyctl", "add_key", "request_key",
         "userfaultfd", "perf_event_open", "ptrace", "process_vm_readv", "process_vm_writev", "kexec_load",
         "kexec_file_load", "init_module", "finit_module", "delete_module", "unshare", "setns", "mount",
         "umount2", "pivot_root", "swapon", "swapoff", "reboot")

TRY_CALLS = r'''
import ctypes, errno, os

def try_calls(calls):
    """Each call by number, straight through libc's syscall(): what the kernel answers."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    out = {}
    for name, number, args in calls:
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
        err = ctypes.get_errno()
        if name.startswith("clone") and result == 0:     # the child of a clone that went through
            os._exit(0)
        if name.startswith("clone") and result > 0:
            os.waitpid(result, 0)
        elif result >= 0 and name == "userfaultfd":
            os.close(result)
        out[name] = "ok" if result >= 0 else errno.errorcode.get(err, str(err))
    return out

def filter_status():
    return [line.split(":")[1].strip() for line in open("/proc/self/status") if line.startswith("Seccomp:")]

def clone3():
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(ctypes.c_long(435), ctypes.c_long(0), ctypes.c_long(0))
    return errno.errorcode.get(ctypes.get_errno(), "?") if result < 0 else "ok"
'''


def _numbered() -> list[list]:
    return [[name, syscall_filter.syscall_number(call), list(args)] for name, (call, args) in CALLS.items()
            if syscall_filter.syscall_number(call) >= 0]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("syscalls")
    (root / "assignments").mkdir()
    (root / "assignments" / "hostile.py").write_text(TRY_CALLS)
    return str(root)


@pytest.fixture(scope="module")
def in_the_worker(hostile):
    calls = [Call("hostile", "try_calls", {"calls": _numbered()}), Call("hostile", "filter_status", {}),
             Call("hostile", "clone3", {})]
    run = run_calls(hostile, calls, Limits(call_seconds=60, import_seconds=30))
    for outcome in run.outcomes:
        assert outcome.error is None, outcome.error
    return [o.value for o in run.outcomes]


@pytest.fixture(scope="module")
def in_a_rank(hostile):
    call = Call("hostile", "run_function", {"world_size": 2, "function": "try_calls", "args": [_numbered()]})
    out = run_gloo(hostile, [call], gloo=GlooLimits(scenario_seconds=30)).outcomes[0]
    assert out.error is None, out.error
    return out.value


def _control(filtered: bool) -> dict[str, str]:
    """The calls from a fresh root interpreter with every capability, filtered or not."""
    script = TRY_CALLS + (
        "\nimport json, sys\n"
        "from shardlab.autograder.sandbox import syscall_filter\n"
        + ("ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)\nsyscall_filter.install()\n" if filtered else "")
        + f"print(json.dumps(try_calls({_numbered()!r})))\n")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def controls():
    if os.geteuid() != 0:
        pytest.skip("the unfiltered control needs root's capabilities")
    return _control(filtered=False), _control(filtered=True)


def test_every_named_call_is_attacked():
    assert set(NAMED) <= set(CALLS)
    assert set(NAMED) <= set(syscall_filter.DENIED)


@pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")
def test_the_jailed_worker_runs_under_a_filter(in_the_worker):
    _, status, clone3 = in_the_worker
    assert status == ["2"]                    # SECCOMP_MODE_FILTER
    assert clone3 == "ENOSYS"                 # the C library falls back to clone, whose flags are filtered


@pytest.mark.parametrize("name", list(CALLS))
def test_a_denied_call_answers_eperm_in_the_worker(in_the_worker, name):
    answers = in_the_worker[0]
    if name not in answers:
        pytest.skip(f"{CALLS[name][0]} is no system call of this machine")
    assert answers[name] == "EPERM"


@pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")
@pytest.mark.parametrize("name", list(CALLS))
def test_a_denied_call_answers_eperm_in_a_rank(in_a_rank, name):
    for rank in in_a_rank:
        if name in rank["value"]:
            assert rank["value"][name] == "EPERM", rank


@pytest.mark.parametrize("name", list(CALLS))
def test_the_filter_is_what_answers(controls, name):
    unfiltered, filtered = controls
    if name not in unfiltered:
        pytest.skip(f"{CALLS[name][0]} is no system call of this machine")
    assert unfiltered[name] != "EPERM"        # with every capability: the call's own answer
    assert filtered[name] == "EPERM"


def test_threads_and_forks_still_work_under_the_filter():
    """What the C library and torch do under the filter: threads (clone3 answers ENOSYS,
    then clone), fork, a subprocess."""
    script = ("import ctypes, os, subprocess, threading\n"
              "from shardlab.autograder.sandbox import syscall_filter\n"
              "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)\nsyscall_filter.install()\n"
              "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
              "pid = os.fork()\n"
              "if pid == 0: os._exit(7)\n"
              "print('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
              "print(subprocess.run(['echo', 'exec'], capture_output=True, text=True).stdout.strip())\n"
              "import torch; print('torch', int(torch.ones(64, 64).sum().item()))\n")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["thread", "fork", "7", "exec", "torch", "4096"]
