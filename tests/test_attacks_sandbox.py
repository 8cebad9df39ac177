"""Attacks on the sandbox walls (autograder/jail.py, autograder/sandbox.py),
each from a hostile submission that controls its whole process: reading the
answer key by any path, escaping and outliving the sandbox, leaving files
behind, stretching the deadline with messages. Run both in the plain-call
sandbox and in a gloo rank's student process.

Walls that need what this machine lacks (namespaces, cgroups) are skipped
with the reason in the summary; CI runs as root and has them all."""
from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import pytest

from shardlab.autograder.sandbox import jail
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.gloo.seeds import data_seed_key
from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox.process import Limits, run_calls
from helpers import WALK_FOR_SOURCE, module_submission, run_cli

REPO = Path(__file__).resolve().parents[1]
WALLS = jail.walls()
needs_namespaces = pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")
needs_cgroup = pytest.mark.skipif(not WALLS.cgroup, reason=f"this machine has {WALLS.describe()}")
pytestmark = pytest.mark.sandbox

HOSTILE = r'''
import os, signal, subprocess, sys, threading, time, zipfile, zlib, ctypes

''' + WALK_FOR_SOURCE + r'''

def visible(paths):
    return [p for p in paths if os.path.exists(p)]

def read_or_change(paths):
    """What each path shows, and whether it can be written, renamed or unmasked."""
    out = {}
    for p in paths:
        shown = sorted(os.listdir(p)) if os.path.isdir(p) else open(p, "rb").read().decode("latin-1")
        changed = []
        for how in ("write", "rename", "unmount"):
            try:
                if how == "write":
                    open(os.path.join(p, "x") if os.path.isdir(p) else p, "a").close()
                elif how == "rename":
                    os.rename(p, p + ".moved")
                elif ctypes.CDLL(None, use_errno=True).umount2(p.encode(), 2) != 0:
                    continue
                changed.append(how)
            except OSError:
                pass
        out[p] = [shown, changed]
    return out

def outlive(marker):
    """Detach every way there is: a new session, double fork, no parent-death
    signal, SIGTERM ignored; a thread too."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)          # PR_SET_PDEATHSIG = 0
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            os.execvp("sleep", ["sleep", "300", marker])
        os._exit(0)
    threading.Thread(target=time.sleep, args=(300,), daemon=False).start()
    return "started"

def leave_files(marker):
    out = []
    for d in ("/tmp", "/dev/shm", os.environ.get("HOME", "/tmp")):
        try:
            with open(os.path.join(d, marker), "w") as f:
                f.write("left behind")
            out.append(d)
        except OSError:
            pass
    return sorted(set(out))

def flood_channel():
    """Write the grader's own protocol messages on every inherited descriptor,
    forever, from a thread: an 'importing' line used to reset the deadline."""
    def spam():
        while True:
            for fd in range(3, 64):
                try:
                    os.write(fd, b'{"importing": "memory"}\n')
                except OSError:
                    pass
    threading.Thread(target=spam, daemon=True).start()
    time.sleep(600)

def nest_channel():
    """One result line of 200,000 nested brackets on every inherited descriptor: parsing it
    exhausts the parser's recursion (a RecursionError used to escape the grader)."""
    for fd in range(3, 64):
        try:
            os.write(fd, b"[" * 200_000 + b"\n")
        except OSError:
            pass
    time.sleep(600)

def whoami():
    caps = [l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))]
    return [os.getuid(), os.getpid(), caps, sorted(os.listdir("/proc"))[:3]]

def grader_files(parent):
    """Every file under the grader's temporary folders this process can open (read-write first),
    and whether it sees the folder at all."""
    opened = []
    for top, dirs, files in os.walk(parent):
        for name in files:
            path = os.path.join(top, name)
            for mode in (os.O_RDWR, os.O_RDONLY):
                try:
                    os.close(os.open(path, mode))
                    opened.append([path, mode])
                    break
                except OSError:
                    pass
    return [opened, os.path.exists(parent)]

def neighbours():
    """What another grading could be reached through: processes, temp dirs, sockets."""
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    tmp = os.listdir("/tmp")
    import socket
    try:
        nets = [n for _, n in socket.if_nameindex()]
    except OSError:                 # a netlink socket, refused in every jail (docs/trust.md)
        nets = None
    return [len(pids), tmp, nets]
'''


@pytest.fixture
def hostile(tmp_path):
    return str(module_submission(tmp_path, "hostile", HOSTILE))


def _ask(root, function, limits=Limits(call_seconds=120, import_seconds=30), **args):
    run = run_calls(root, [Call("hostile", function, args)], limits)
    return run.outcomes[0]


def _ask_ranks(root, function, *args, world_size=2, seconds=20.0):
    call = Call("hostile", "run_function", {"world_size": world_size, "function": function, "args": list(args)})
    return run_gloo(root, [call], gloo=GlooLimits(scenario_seconds=seconds)).outcomes[0]


def _solution_markers() -> list[str]:
    """The longest line of the solution blocks of every solutions file (any
    copy of a solutions body holds it), and the data seed key."""
    markers = []
    for path in sorted((REPO / "solutions").glob("*.py")):
        blocks = re.findall(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", path.read_text(), re.S)
        lines = [line.strip() for block in blocks for line in block.splitlines()]
        if lines:
            markers.append(max(lines, key=len))
    markers.append(data_seed_key().decode())
    return markers


@needs_namespaces
def test_no_visible_file_holds_a_solution_or_the_secret(hostile):
    markers = _solution_markers()
    assert len(markers) == 6                 # five solutions files and the secret
    # the markers are found where they are (the walk can see them when visible)
    for m in markers[:-1]:
        assert any(m in p.read_text() for p in (REPO / "solutions").glob("*.py"))
    out = _ask(hostile, "walk_for", limits=Limits(call_seconds=240, import_seconds=30), markers=markers)
    assert out.error is None, out.error
    seen, found = out.value
    assert seen > 1000                      # it really walked the interpreter and the system
    assert found == []


@needs_namespaces
def test_the_grader_and_its_outputs_are_not_visible(hostile):
    paths = [str(REPO / d) for d in ("solutions", "reference", "tests", ".git", "autograder", "shardlab-out")]
    paths += [str(Path.home() / ".cache"), str(Path.home() / ".ssh"), str(REPO / "README.md")]
    out = _ask(hostile, "visible", paths=paths)
    assert out.error is None and out.value == [], out


@needs_namespaces
def test_the_graders_site_packages_entries_show_nothing(hostile):
    """The jail masks the grader's own entries of site-packages where they lie: their names may
    show (as under Landlock), their contents never, and the masks cannot be written, moved or lifted."""
    # (this test's sys.path also holds the repository, which the jail does not show at all)
    entries = [str(site / name) for site, names in jail.grader_site_entries().items() for name in names
               if any(site.is_relative_to(p) for p in jail.allowed_paths())]
    assert entries, "the grader is installed in no site-packages folder: nothing to check"
    assert any(os.path.getsize(e) for e in entries if os.path.isfile(e)) or any(
        os.listdir(e) for e in entries if os.path.isdir(e))            # outside, they hold something
    out = _ask(hostile, "read_or_change", paths=entries)
    assert out.error is None, out.error
    assert out.value == {e: [[] if os.path.isdir(e) else "", []] for e in entries}


@needs_namespaces
def test_student_runs_without_privileges_in_its_own_pid_namespace(hostile):
    out = _ask(hostile, "whoami")
    uid, pid, caps, procs = out.value
    assert uid == (65534 if os.geteuid() == 0 else 0)          # nobody, or a user namespace's root
    assert pid == 2                                             # PID 1 is the trusted init
    assert all(line.split()[1] == "0" * 16 for line in caps), caps
    assert procs[:2] == ["1", "2"]


def _alive_with(marker: str) -> list[int]:
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            alive.append(int(pid))
    return alive


@needs_namespaces
def test_nothing_outlives_a_plain_call(hostile):
    marker = f"shardlab-outlive-{os.getpid()}-{time.monotonic_ns()}"
    assert _ask(hostile, "outlive", marker=marker).value == "started"
    time.sleep(0.1)                                          # SIGKILL delivery is asynchronous
    assert _alive_with(marker) == []


@needs_namespaces
def test_nothing_outlives_a_gloo_rank(hostile):
    marker = f"shardlab-outlive-gloo-{os.getpid()}-{time.monotonic_ns()}"
    out = _ask_ranks(hostile, "outlive", marker)
    assert out.error is None, out.error
    time.sleep(0.1)
    assert _alive_with(marker) == []


@needs_namespaces
def test_nothing_written_remains(hostile, short_tmp, monkeypatch):
    """What the student wrote to /tmp or /dev/shm dies with its sandbox, and
    the grader's own staging and group folders are gone when grading returns."""
    grader_tmp = short_tmp                     # the gloo group's socket is made there: a short path
    monkeypatch.setattr(tempfile, "tempdir", str(grader_tmp))
    marker = f"shardlab-left-{os.getpid()}-{time.monotonic_ns()}"
    assert _ask(hostile, "leave_files", marker=marker).value == ["/dev/shm", "/tmp"]
    assert _ask_ranks(hostile, "leave_files", marker).error is None
    for d in ("/tmp", "/dev/shm", str(Path.home())):
        assert not os.path.exists(os.path.join(d, marker))
    assert os.listdir(grader_tmp) == []


def test_a_line_nested_too_deep_is_a_corrupted_channel(hostile):
    out = _ask(hostile, "nest_channel", limits=Limits(call_seconds=5, import_seconds=30))
    assert out.error and "corrupted the grader's result channel" in out.error, out


@needs_namespaces
def test_messages_do_not_extend_the_deadline(hostile):
    start = time.monotonic()
    out = _ask(hostile, "flood_channel", limits=Limits(call_seconds=2, import_seconds=10))
    assert out.error and ("did not finish" in out.error or "corrupted" in out.error), out
    assert time.monotonic() - start < 5 * (2 + 2)       # 5x: the 2 s call deadline and the worker's start


@needs_namespaces
def test_a_sandbox_reaches_no_neighbour(hostile):
    """Own PID namespace (two processes: init and itself), a private /tmp, and no network
    interface to list: the netlink socket that lists them is refused (else only an unconfigured loopback)."""
    import sys
    # an interpreter that lives under /tmp (a CI checkout's venv) is bound there, read-only
    interpreter = {Path(p).parts[2] for p in (sys.prefix, sys.base_prefix) if Path(p).parts[1:2] == ("tmp",)}
    out = _ask(hostile, "neighbours")
    nprocs, tmp, nets = out.value
    assert nprocs <= 3 and set(tmp) <= interpreter and nets in (None, ["lo"])   # None: netlink refused
    ranks = _ask_ranks(hostile, "neighbours")
    assert ranks.error is None
    for rank in ranks.value:
        assert rank["value"][0] <= 3 and set(rank["value"][1]) <= interpreter


@needs_namespaces
def test_no_rank_reaches_its_groups_fingerprint_board(hostile, short_tmp, monkeypatch):
    """The trusted ranks check each other's collectives on a file in their group's folder
    (`gloo.ranks.board`), which a forged fingerprint on could pass a mismatched collective or
    hang a rank; beside it, each rank's status slot (`gloo.ranks.status`), which a forged label
    on could misname a hang. A student process told where the grader's folders are opens nothing
    there."""
    from shardlab.autograder.sandbox.gloo import group
    graders = short_tmp                        # the gloo group's socket is made there: a short path
    monkeypatch.setattr(tempfile, "tempdir", str(graders))
    boards = []

    def create_board(path, world_size):
        boards.append(path)
        return real(path, world_size)
    real = group.create_board
    monkeypatch.setattr(group, "create_board", create_board)
    ranks = _ask_ranks(hostile, "grader_files", str(graders))
    assert boards and all(Path(b).is_relative_to(graders) for b in boards)     # the target was there
    assert ranks.error is None, ranks.error
    assert [rank["value"] for rank in ranks.value] == [[[], False]] * 2


@needs_cgroup
def test_memory_of_a_whole_sandbox_is_bounded(tmp_path):
    """Many processes each under the address-space limit: the cgroup bounds their sum."""
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "hog.py").write_text(
        "import os, time\n"
        "def hog(n):\n"
        "    for _ in range(n):\n"
        "        if os.fork() == 0:\n"
        "            b = bytearray(700 << 20)\n"
        "            for i in range(0, len(b), 4096): b[i] = 1\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    time.sleep(30)\n")
    start = time.monotonic()
    run = run_calls(str(tmp_path), [Call("hog", "hog", {"n": 8})],
                    Limits(call_seconds=8, sandbox_memory_bytes=1 << 30))
    assert run.outcomes[0].error                       # killed (OOM) or out of time, never 5.6 GB
    assert time.monotonic() - start < 5 * (8 + 2)      # 5x: the 8 s call deadline and the worker's start


NEIGHBOUR = r'''
import os, signal, socket, threading, time

def _disturb():
    """Everything an escaped worker used to do to its neighbours in a batch."""
    for _ in range(40):
        try:
            os.kill(-1, signal.SIGKILL)                  # every process it can see
        except OSError:
            pass
        for top in ("/tmp", "/dev/shm"):
            for name in os.listdir(top):
                path = os.path.join(top, name, "ctl.sock")
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(path)
                    s.sendall(b'{"error": "rank 0: pwned", "collectives": 1}\n')
                except OSError:
                    pass
        time.sleep(0.1)

if os.fork() == 0:
    os.setsid()
    _disturb()
    os._exit(0)
threading.Thread(target=_disturb, daemon=True).start()
'''


@needs_namespaces
def test_an_attacker_in_a_batch_harms_no_neighbour(tmp_path):
    """An attacker beside two copies of the solutions (--jobs 2): both copies
    get full marks."""
    import csv
    import shutil
    for name in ("honest1", "attacker", "honest2"):
        shutil.copytree(REPO / "solutions", tmp_path / name / "assignments",
                        ignore=shutil.ignore_patterns("__pycache__"))
    for module in ("memory", "fsdp", "buckets", "comm4d"):
        path = tmp_path / "attacker" / "assignments" / f"{module}.py"
        path.write_text(NEIGHBOUR + path.read_text())
    out = tmp_path / "out"
    r = run_cli("grade", *(str(tmp_path / n) for n in ("honest1", "attacker", "honest2")),
                "--jobs", "2", "--out", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {row["submission"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    for name in ("honest1", "honest2"):
        assert rows[name]["status"] == "ok", rows[name]
        assert float(rows[name]["total"]) >= float(rows[name]["max_score"]), rows[name]


def test_the_shardlab_command_gets_the_walls_the_machine_has():
    """The installed `shardlab` script (what setup.sh and instructors run) puts
    its bin/ folder first on sys.path; the jail must still build its root
    there (bin/ holds a file named like the grader's package, and symlinks)."""
    import subprocess
    import sys
    script = Path(sys.executable).parent / "shardlab"
    probe = "from shardlab.autograder.sandbox.jail import walls; print(walls().describe())"
    machine = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd="/")
    done = subprocess.run([str(script), "walls"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == machine.stdout.strip(), done.stdout + done.stderr
