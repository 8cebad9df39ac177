"""Attacks on the Landlock walls (autograder/sandbox/landlock.py), the level a
machine gets when user namespaces are refused: a non-root instructor on
Ubuntu >= 23.10, Debian with kernel.unprivileged_userns_clone = 0.

That path is forced here: the grader runs as the unprivileged user `nobody`
(setuid from root, in a private mount namespace where the interpreter's
folder is reachable by nobody; nothing else of the machine changes) with the
test-only switch SHARDLAB_NO_JAIL=1, which makes `jail.walls()` find no
namespaces. As nobody, the repository (solutions/, reference/), /tmp and
nobody's own cache with the data seed key are all readable or writable by
plain file permissions: only Landlock stands between them and the student.
A hostile submission then tries, in the plain-call worker and in a gloo
rank's student process, what it tries behind the jail (tests/test_attacks_sandbox.py):
read the answer key, write outside its folder, reach the network and the
grader's sockets, signal the grader. And the solutions still grade in full."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from shardlab.autograder.sandbox import jail, landlock
from shardlab.autograder.sandbox.gloo.seeds import POOL_SIZE_ENV
from helpers import WALK_FOR_SOURCE

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(900),
              pytest.mark.skipif(landlock.abi() < 1, reason=landlock.unavailable() or "no Landlock"),
              pytest.mark.skipif(os.geteuid() != 0, reason="running the grader as nobody needs root"),
              pytest.mark.skipif(not shutil.which("setpriv") or not shutil.which("unshare"),
                                 reason="needs util-linux's setpriv and unshare")]

HOSTILE = r'''
import ctypes, errno, os, resource, socket, sys, zipfile, zlib

def _why(exc):
    return errno.errorcode.get(exc.errno, str(exc)) if isinstance(exc, OSError) else type(exc).__name__

def read_answer_key(paths):
    out = {}
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.read(16)
            out[path] = "read"
        except Exception as exc:
            out[path] = _why(exc)
    for name in ("shardlab.reference", "reference", "solutions"):
        try:
            __import__(name)
            out[name] = "imported"
        except Exception as exc:
            out[name] = type(exc).__name__
    return out

''' + WALK_FOR_SOURCE + r'''

def write_outside(paths):
    out = {}
    for path in paths + [os.path.join(os.environ["TMPDIR"], "mine")]:
        try:
            with open(path, "w") as f:
                f.write("left behind")
            out[path] = "wrote"
        except Exception as exc:
            out[path] = _why(exc)
    return [os.environ["TMPDIR"], out]

def reach(port, unix_path):
    out = {}
    for what, family, address in (("tcp", socket.AF_INET, ("127.0.0.1", port)), ("unix", socket.AF_UNIX, unix_path)):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(address)
            s.sendall(b"pwned\n")
            out[what] = "connected"
        except Exception as exc:
            out[what] = _why(exc)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        out["bind"] = "bound"
    except Exception as exc:
        out["bind"] = _why(exc)
    return out

def signal_grader(pid):
    try:
        os.kill(pid, 0)
        return "reached"
    except Exception as exc:
        return _why(exc)

def state():
    status = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
              if k in ("Uid", "Seccomp", "NoNewPrivs", "CapEff")}
    limits = {name: resource.getrlimit(getattr(resource, name))[0]
              for name in ("RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_AS")}
    return [status, limits]
'''

# run as nobody: grade the hostile submission with the plain worker and gloo ranks
NOBODY_RUN = r'''
import json, os, socket, sys, threading
args = json.loads(sys.argv[1])
from shardlab.autograder.sandbox import jail
from shardlab.autograder.sandbox.gloo.seeds import data_seed_key
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.process import Limits, run_calls
from shardlab.autograder.core.parts import Call
from shardlab.reference.cache import cache_dir

walls = jail.walls()
key = data_seed_key().decode()
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(8)
unix = socket.socket(socket.AF_UNIX); unix.bind(args["unix"]); unix.listen(8)
heard = []
def listen(sock):
    while True:
        conn, _ = sock.accept()
        heard.append(conn.recv(64).decode())
for sock in (tcp, unix):
    threading.Thread(target=listen, args=(sock,), daemon=True).start()
markers = args["markers"] + [key]
secret_files = args["secret_files"] + [str(p) for p in cache_dir().rglob("*") if p.is_file()]
outside = [os.path.join(d, args["marker"]) for d in ("/tmp", str(cache_dir()), os.environ["HOME"], args["repo"])]
calls = [Call("hostile", "state", {}),
         Call("hostile", "read_answer_key", {"paths": secret_files}),
         Call("hostile", "write_outside", {"paths": outside}),
         Call("hostile", "reach", {"port": tcp.getsockname()[1], "unix_path": args["unix"]}),
         Call("hostile", "signal_grader", {"pid": os.getpid()}),
         Call("hostile", "walk_for", {"markers": markers, "tops": args["tops"]})]
plain = run_calls(args["submission"], calls, Limits(call_seconds=240, import_seconds=30))
ranks = {}
for function, fargs in (("state", []), ("read_answer_key", [secret_files]), ("write_outside", [outside]),
                        ("reach", [tcp.getsockname()[1], args["unix"]]), ("signal_grader", [os.getpid()])):
    call = Call("hostile", "run_function", {"world_size": 2, "function": function, "args": fargs})
    out = run_gloo(args["submission"], [call], gloo=GlooLimits(scenario_seconds=60)).outcomes[0]
    ranks[function] = out.error or [r["value"] for r in out.value]
print(json.dumps({"level": walls.level, "describe": walls.describe(), "uid": os.getuid(),
                  "plain": [o.error or o.value for o in plain.outcomes], "ranks": ranks, "heard": heard,
                  "outside": outside, "left": [p for p in outside if os.path.exists(p)]}))
'''


def _hidden_ancestor(path: Path) -> Path | None:
    """The topmost folder above `path` that others cannot enter (a 0700 /root), if any."""
    for parent in reversed(path.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def as_nobody(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`argv` as the user nobody, in a private mount namespace where the
    interpreter is reachable: a folder above it that others cannot enter
    (pyenv's /root) is covered by an empty tmpfs holding only the interpreter."""
    base = Path(sys.base_prefix).resolve()
    if _hidden_ancestor(REPO / "x") is not None:
        pytest.skip(f"{REPO} is not reachable by nobody")
    hidden = _hidden_ancestor(base / "x")
    steps = ["set -e"]
    with tempfile.TemporaryDirectory(prefix="shardlab-landlock-aside-") as aside:
        if hidden is not None:
            steps += [f"mount --bind {base} {aside}", f"mount -t tmpfs -o mode=755 tmpfs {hidden}",
                      f"mkdir -p {base}", f"mount --move {aside} {base}"]
        steps.append(f"exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
                     + " ".join(map(_quote, argv)))
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", "\n".join(steps)],
                              env=env, capture_output=True, text=True, timeout=timeout)


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _solution_markers() -> list[str]:
    """The longest line of the solution blocks of every solutions file."""
    markers = []
    for path in sorted((REPO / "solutions").glob("*.py")):
        blocks = re.findall(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", path.read_text(), re.S)
        lines = [line.strip() for block in blocks for line in block.splitlines()]
        if lines:
            markers.append(max(lines, key=len))
    return markers


@pytest.fixture(scope="module")
def nobody_home():
    home = Path(tempfile.mkdtemp(prefix="shardlab-landlock-test-"))
    home.chmod(0o755)
    for sub in ("home", "cache", "sockets", "submission/assignments"):
        (home / sub).mkdir(parents=True)
    (home / "submission" / "assignments" / "hostile.py").write_text(HOSTILE)
    for p in [home, *home.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _env(home: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(home / "home"), "XDG_CACHE_HOME": str(home / "cache"),
            "TMPDIR": str(home), jail.NO_NAMESPACES_ENV: "1", POOL_SIZE_ENV: os.environ.get(POOL_SIZE_ENV, "2"),
            "SHARDLAB_CACHE_DIR": str(home / "cache" / "shardlab")}


@pytest.fixture(scope="module")
def attacked(nobody_home):
    marker = f"shardlab-landlock-left-{os.getpid()}"
    secret_files = [str(p) for p in sorted((REPO / "solutions").glob("*.py"))]
    secret_files += [str(REPO / "reference" / "course.toml"), str(REPO / "reference" / "fsdp.py")]
    args = {"submission": str(nobody_home / "submission"), "repo": str(REPO), "marker": marker,
            "unix": str(nobody_home / "sockets" / "grader.sock"), "markers": _solution_markers(),
            "secret_files": secret_files,
            "tops": [str(REPO), sys.prefix, sys.base_prefix, str(nobody_home)]}
    done = as_nobody([sys.executable, "-I", "-c", NOBODY_RUN, json.dumps(args)], _env(nobody_home), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_grader_ran_as_nobody_behind_landlock(attacked):
    assert attacked["uid"] == NOBODY
    assert attacked["level"] == "landlock", attacked["describe"]
    for status, limits in [attacked["plain"][0], *attacked["ranks"]["state"]]:
        assert status["Uid"].split()[0] == str(NOBODY)
        assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1"
        assert 0 < limits["RLIMIT_NPROC"] < 1 << 20          # what no cgroup bounds here
        assert limits["RLIMIT_NOFILE"] == jail.OPEN_FILES
        assert limits["RLIMIT_FSIZE"] == jail.FILE_BYTES


def test_the_answer_key_cannot_be_read(attacked):
    for answers in [attacked["plain"][1], *attacked["ranks"]["read_answer_key"]]:
        assert answers, attacked
        files = {p: a for p, a in answers.items() if p.startswith("/")}
        assert len(files) >= 8                     # five solutions, the course, the reference, the seed keys
        assert set(files.values()) == {"EACCES"}, files
        assert "imported" not in answers.values(), answers


def test_no_readable_file_holds_a_solution_or_the_secret(attacked):
    seen, found = attacked["plain"][5]
    assert seen > 1000                             # it really read the interpreter's folders
    assert found == []


def test_nothing_is_written_outside_its_private_folder(attacked):
    for tmpdir, wrote in [attacked["plain"][2], *attacked["ranks"]["write_outside"]]:
        mine = os.path.join(tmpdir, "mine")
        assert wrote.pop(mine) == "wrote"           # its own private folder works
        assert set(wrote.values()) == {"EACCES"}, wrote
        assert not os.path.exists(tmpdir)            # gone with its sandbox
    assert attacked["left"] == []


def test_the_network_and_the_graders_sockets_are_out_of_reach(attacked):
    for reached in [attacked["plain"][3], *attacked["ranks"]["reach"]]:
        assert reached == {"tcp": "EPERM", "unix": "EPERM", "bind": "EPERM"}, reached
    assert attacked["heard"] == []


@pytest.mark.skipif(landlock.abi() < 6, reason=f"Landlock ABI {landlock.abi()} < 6 scopes no signals")
def test_a_signal_does_not_reach_the_grader(attacked):
    assert attacked["plain"][4] == "EPERM"
    assert attacked["ranks"]["signal_grader"] == ["EPERM", "EPERM"]


def test_the_solutions_grade_in_full_behind_landlock(nobody_home):
    """Torch, gloo and every question's harness work under Landlock, the rlimits and the filter."""
    submission = nobody_home / "solutions"
    shutil.copytree(REPO / "solutions", submission / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    for p in [submission, *submission.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    shardlab = str(Path(sys.executable).parent / "shardlab")
    done = as_nobody([shardlab, "grade", str(submission), "--json"], _env(nobody_home), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["walls"].startswith("lighter walls: Landlock instead of namespaces"), report["walls"]
    assert report["score"] >= report["max_score"], [(p["id"], p["feedback"]) for q in report["questions"]
                                                    for p in q["parts"] if p["score"] < p["max_score"]]
