"""The sandbox's walls, for the processes that run student code.

When the grader runs as root on Linux, a worker is started under
`unshare --net --pid --mount --fork --kill-child` (see `launcher()`): its
own network namespace (loopback only, so gloo works and nothing leaves the
machine), its own PID namespace (when the worker, PID 1 there, ends, the
kernel kills everything it started, however it detached), and its own mount
namespace. After the worker has imported what it trusts and before it
imports student code, `enter()`:

1. brings up loopback;
2. hides the answer key: an empty read-only tmpfs over `reference/`,
   `solutions/` and the project's `tests/`;
3. keeps the interpreter reachable for an unprivileged user (a directory on
   the way that others may not enter, such as /root, is shadowed by a tmpfs
   that holds bind mounts of just the paths needed);
4. drops to the unprivileged user `nobody`, with no_new_privs: it cannot
   write the grader's files, undo the mounts or read hidden files.

Without root (or where namespaces are unavailable) the worker runs with the
lighter walls only (import blocking, rlimits, its own session), and
`describe()` says so.
"""
from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import stat
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

UNPRIVILEGED = "nobody"
_PR_SET_NO_NEW_PRIVS = 38


@lru_cache(maxsize=1)
def available() -> bool:
    """Root, Linux, util-linux's unshare, and namespaces that actually work."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux") or not shutil.which("unshare"):
        return False
    try:
        pwd.getpwnam(UNPRIVILEGED)
        return subprocess.run(_unshare() + ["true"], capture_output=True, timeout=10).returncode == 0
    except (KeyError, OSError, subprocess.SubprocessError):
        return False


def _unshare() -> list[str]:
    return [shutil.which("unshare"), "--net", "--pid", "--mount", "--fork", "--kill-child",
            "--propagation", "private", "--"]


def launcher() -> list[str]:
    """Command prefix that starts a worker inside fresh namespaces (or nothing)."""
    return _unshare() if available() and os.environ.get("SHARDLAB_NO_JAIL") != "1" else []


def describe() -> str:
    if launcher():
        return "namespaces (net: loopback only, pid, mount) and user 'nobody'"
    return "subprocess with import blocking and rlimits (no namespaces: not root)"


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _blocked_ancestors(path: Path) -> list[Path]:
    """Ancestors of `path` that others may not traverse (no o+x)."""
    out = []
    for parent in reversed(path.parents):
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                out.append(parent)
        except OSError:
            pass
    return out


def _keep_reachable(paths: list[Path], scratch: Path) -> None:
    """Shadow each untraversable directory D with a tmpfs holding bind mounts
    of the children of D that `paths` need."""
    for path in paths:
        for blocked in _blocked_ancestors(path):
            child = blocked / path.relative_to(blocked).parts[0]
            hold = scratch / f"hold{len(list(scratch.iterdir()))}"
            hold.mkdir()
            _run("mount", "--bind", str(child), str(hold))
            if not os.path.ismount(blocked):
                _run("mount", "-t", "tmpfs", "-o", "mode=0755,size=64k", "tmpfs", str(blocked))
            target = blocked / child.name
            target.mkdir(exist_ok=True)
            _run("mount", "--bind", str(hold), str(target))


def enter(hidden: list[Path], needed: list[Path]) -> None:
    """Called inside the namespaces, as root, before any student code runs."""
    _run("ip", "link", "set", "lo", "up")
    scratch = Path("/tmp") / f".shardlab-jail-{os.getpid()}-{os.urandom(4).hex()}"
    scratch.mkdir(mode=0o700)
    _run("mount", "-t", "tmpfs", "-o", "mode=0700,size=64k", "tmpfs", str(scratch))
    for d in hidden:
        if d.is_dir():
            _run("mount", "-t", "tmpfs", "-o", "ro,mode=0555,size=4k", "tmpfs", str(d))
    _keep_reachable([p for p in needed if p.exists()], scratch)
    user = pwd.getpwnam(UNPRIVILEGED)
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.environ["HOME"] = "/tmp"


def answer_key_dirs() -> list[Path]:
    """Where the answer key lives on disk: hidden from student code."""
    repo = Path(__file__).resolve().parents[1]
    out = [repo / "reference", repo / "solutions", repo / "tests"]
    for name in ("reference", "solutions"):
        spec = __import__("importlib.util").util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out.append(Path(loc))
    return sorted(set(out))


def interpreter_paths() -> list[Path]:
    """What the unprivileged student process must still be able to read."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent}
    paths.update(Path(p) for p in sys.path if p and Path(p).is_dir())
    return sorted(paths)


def stage(root: str | Path, into: Path) -> Path:
    """A copy of the submission's assignments/ that `nobody` can read (the
    original may sit in a private temp dir); returns the new root."""
    into.chmod(0o755)
    shutil.copytree(Path(root) / "assignments", into / "assignments",
                    ignore=shutil.ignore_patterns("__pycache__"), symlinks=False)
    for dirpath, dirnames, filenames in os.walk(into):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return into


def hand_over(folder: Path, *files: Path) -> None:
    """Give the unprivileged user a private folder of the grader's (the gloo
    store and control socket live there)."""
    user = pwd.getpwnam(UNPRIVILEGED)
    os.chown(folder, user.pw_uid, user.pw_gid)
    for f in files:
        os.chown(f, user.pw_uid, user.pw_gid)


# ---- the walls this machine offers (interface used by the grading policy) ----
from dataclasses import dataclass as _dataclass


@_dataclass(frozen=True)
class Walls:
    """What isolation this machine gives student code, probed once per process.

    `namespaces`: user/pid/mount/net/ipc namespaces and a private root
    (root, or unprivileged user namespaces); `cgroup`: a cgroup per sandbox
    (memory, pids, cpu; killed as a whole). `missing` has one line per wall
    that is absent, saying why. `full` is every wall up."""

    namespaces: bool
    cgroup: bool
    missing: tuple[str, ...] = ()

    @property
    def full(self) -> bool:
        return self.namespaces and self.cgroup and not self.missing

    def describe(self) -> str:
        if self.full:
            return "full walls: own namespaces and private root, unprivileged, own cgroup"
        return "lighter walls (" + "; ".join(self.missing) + ")"


@lru_cache(maxsize=1)
def walls() -> Walls:
    """Probed once per process. (Placeholder until the allow-list jail lands:
    reports the old root-only jail.)"""
    missing = []
    if not available():
        missing.append("no namespaces: the grader is not root or unshare is missing")
    missing.append("no per-sandbox cgroup yet")
    return Walls(namespaces=available(), cgroup=False, missing=tuple(missing))
