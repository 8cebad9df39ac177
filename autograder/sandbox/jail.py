"""The walls around every process that runs student code (docs/trust.md).

A trusted process calls `confine(submission, keep)` after it has imported
everything it trusts. `confine` returns only in the student's process, which
then has:

- its own user (unprivileged user namespaces: no capabilities left), PID,
  mount, network (no interface up, not even loopback: student code needs no
  network, collectives go through its rank's trusted process), IPC and UTS
  namespaces;
- a private root built from an allow-list (`allowed_paths`): the system's
  libraries, the interpreter and its site-packages *without* the grader's
  own distribution (`reference/`, `solutions/`, `autograder/`), the staged
  submission at /submission (read-only), a fresh /proc, a minimal /dev and
  private tmpfs /tmp and /dev/shm (gone when the sandbox ends);
- the unprivileged user `nobody` (as root) or no capabilities at all (in a
  user namespace), no_new_privs, an empty capability bounding set;
- a trusted PID 1 above it: when the process that called `confine` dies,
  PID 1 dies (parent-death signal, set where the student cannot clear it),
  and the kernel kills everything left in the namespace, however it
  detached.

Process tree (host side on the left):

    caller (trusted; waits, exits with the student's status)
      └─ PID 1 of the new namespaces (trusted init: builds the root, reaps)
           └─ PID 2: the student's process (returns from confine)

Cgroups (`Cgroup`) are the grader's: it puts a sandbox's first process into
its own cgroup before any student code exists, and kills the whole cgroup
when grading returns.

Every student process also gets a system-call filter (`syscall_filter`:
io_uring, bpf, keyrings, ptrace, unshare, mount, ... answer EPERM), installed
last, after the trusted set-up.

Where the kernel offers no namespaces (no root and no unprivileged user
namespaces, or a container without CAP_SYS_ADMIN) but offers Landlock
(Linux >= 5.13), the student's process restricts itself instead
(`landlock`): it reads only the same allow-list as the jail's root and its
staged submission, writes only to a private temporary folder beside the
submission (removed with the sandbox), makes no TCP connection, and gets
rlimits on processes, files and file sizes, since no cgroup bounds it. With
neither (or not Linux), `confine` only closes stray file descriptors and
filters system calls; `walls()` says which level this machine has and what
is missing, and the grading policy (`sandbox.walls`) decides whether to grade.
"""
from __future__ import annotations

import ctypes
import errno
import os
import pwd
import resource
import select
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from shardlab.autograder.sandbox import landlock, syscall_filter

UNPRIVILEGED = "nobody"
SUBMISSION = "/submission"       # where the staged submission appears inside the jail

# linux/sched.h, linux/mount.h, linux/prctl.h
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)

# the grader's own packages: never visible inside the jail
GRADER_PACKAGES = ("shardlab", "tests")

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(Exception):
    """The walls could not be built (a set-up problem, never the student's)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


def _prctl(option: int, arg: int, what: str) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), what)


def die_with_parent() -> None:
    """This process gets SIGKILL when its parent dies (PR_SET_PDEATHSIG): a grader's
    forks never outlive what supervises them. Raises JailError if the kernel refuses."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")


# ---- the allow-list ----------------------------------------------------------------


@lru_cache(maxsize=1)
def grader_entries() -> frozenset[str]:
    """Top-level site-packages names that belong to the grader's distribution
    (its packages, dist-info, editable-install hooks)."""
    names = set(GRADER_PACKAGES)
    try:
        from importlib.metadata import distribution
        for f in distribution("shardlab").files or ():
            names.add(f.parts[0])
    except Exception:  # noqa: BLE001 - not installed as a distribution (running from a tree)
        pass
    return frozenset(names)


def _site_dirs() -> list[Path]:
    return sorted({Path(p).resolve() for p in sys.path if p and Path(p).is_dir()})


@lru_cache(maxsize=1)
def allowed_paths() -> tuple[Path, ...]:
    """Everything the student's process may see besides /proc, /dev, /tmp and
    the submission: the system's programs and libraries, a few files of
    /etc, the interpreter's prefixes (site-packages are filtered later)."""
    system = [Path(p) for p in ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")]
    etc = [Path("/etc") / f for f in ("passwd", "group", "nsswitch.conf", "hosts", "ld.so.cache",
                                      "ld.so.conf", "localtime")]
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                Path(sys.executable).resolve().parent}
    prefixes = {p for p in prefixes if not any(q != p and p.is_relative_to(q) for q in prefixes)}
    return tuple(p for p in system + etc + sorted(prefixes) if os.path.lexists(p))


def _is_grader_entry(name: str, grader: frozenset[str]) -> bool:
    """The grader's, by its distribution's record or by its name (the record found
    may be another copy's: a source tree's egg-info when the working directory is on sys.path)."""
    return (name in grader or name.startswith("__editable__")
            or (name.startswith("shardlab-") and name.endswith((".dist-info", ".egg-info"))))


def grader_site_entries() -> dict[Path, list[str]]:
    """site-packages folders holding grader entries -> those entries (hidden from the student)."""
    grader = grader_entries()
    out = {}
    for d in _site_dirs():
        entries = sorted(e for e in os.listdir(d) if _is_grader_entry(e, grader))
        if entries:
            out[d] = entries
    return out


def _hidden_entries() -> dict[Path, list[tuple[str, bool]]]:
    """What the jail masks, taken before the new root is built: each grader entry of a
    site-packages folder and whether it is a folder. A symlinked entry cannot be masked (a mount
    follows the link), so the caller of `confine` raises instead of showing what it points at."""
    out = {}
    for site, names in grader_site_entries().items():
        for name in names:
            if os.path.islink(site / name):
                raise JailError(f"{site / name} is a symlink: the jail cannot hide it")
        out[site] = [(name, os.path.isdir(site / name)) for name in names]
    return out


# ---- building the root (inside the new namespaces, as PID 1) -------------------------


def _ro_flags(path: str) -> int:
    """The flags a read-only bind remount must keep (locked in a user namespace)."""
    f = os.statvfs(path).f_flag
    out = MS_BIND | MS_REMOUNT | MS_RDONLY
    for st_flag, ms_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
                             (os.ST_RELATIME, MS_RELATIME)):
        if f & st_flag:
            out |= ms_flag
    return out


def _make_target(new_root: str, path: Path, like: str) -> str:
    target = new_root + str(path)
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if os.path.isdir(like):
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.lexists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    return target


def _bind(source_fd_path: str, new_root: str, path: Path, like: str) -> None:
    target = _make_target(new_root, path, like)
    _mount(source_fd_path, target, None, MS_BIND | MS_REC)
    _mount(None, target, None, _ro_flags(target))


def _open_source(path: Path) -> tuple[int, str | None]:
    """What the new root needs of `path`, taken before /tmp is hidden: a
    symlink's target (a link cannot be bind-mounted: /bin -> usr/bin, a
    venv's bin/python), else an O_PATH descriptor to bind from."""
    if os.path.islink(path):
        return -1, os.readlink(path)
    return os.open(str(path), os.O_PATH | os.O_NOFOLLOW), None


def _place(new_root: str, path: Path, source: tuple[int, str | None]) -> None:
    """`path` in the new root: the same symlink, or a read-only bind."""
    fd, link = source
    if link is not None:
        target = new_root + str(path)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        os.symlink(link, target)
    else:
        _bind(f"/proc/self/fd/{fd}", new_root, path, f"/proc/self/fd/{fd}")


def _build_root(new_root: str, sources: dict[Path, tuple[int, str | None]], submission_fd: int | None,
                hidden: dict[Path, list[tuple[str, bool]]], sites: dict[Path, tuple[int, str | None]]) -> None:
    """The allow-listed root in `new_root` (module docstring). The grader's own site-packages
    entries are masked where they lie, a handful of mounts: each folder by an empty read-only
    tmpfs, each file by the root's empty read-only `/.masked`. Their names stay listed, as under
    Landlock; their contents are gone. (Binding every other entry one by one instead cost
    about a thousand mounts per jail: 30 ms of every student process's start, and as much
    again when its namespace ends.)"""
    # the private tmpfs first: an allowed path under /tmp (a checkout's venv)
    # is then bound inside it instead of being hidden by it
    for d, size in (("/tmp", "64m"), ("/dev/shm", "64m")):
        os.makedirs(new_root + d, mode=0o755, exist_ok=True)
        _mount("tmpfs", new_root + d, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={size}")
    for path, source in sources.items():
        _place(new_root, path, source)
    for site, source in sites.items():                  # a site folder outside the allowed paths
        _place(new_root, site, source)
    if hidden:
        os.close(os.open(new_root + "/.masked", os.O_CREAT | os.O_WRONLY, 0o444))
    for site, entries in hidden.items():                # the grader's own packages stay outside
        for name, is_dir in entries:
            target = new_root + str(site / name)
            if is_dir:
                _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k")
            else:
                _bind(new_root + "/.masked", new_root, site / name, new_root + "/.masked")
    if submission_fd is not None:
        _bind(f"/proc/self/fd/{submission_fd}", new_root, Path(SUBMISSION), f"/proc/self/fd/{submission_fd}")
    for dev in ("null", "zero", "full", "random", "urandom"):
        _bind(f"/dev/{dev}", new_root, Path("/dev") / dev, f"/dev/{dev}")
    for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2")):
        os.symlink(to, f"{new_root}/dev/{name}")
    os.makedirs(new_root + "/proc", mode=0o755, exist_ok=True)
    _mount("proc", new_root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _pivot(new_root: str) -> None:
    if _SYS_PIVOT_ROOT is None:
        raise JailError(f"pivot_root: unknown system call number on {os.uname().machine}")
    os.chdir(new_root)
    os.mkdir(".old-root", 0o700)
    _check(_libc.syscall(_SYS_PIVOT_ROOT, b".", b".old-root"), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old-root", MNT_DETACH), "unmount the old root")
    os.rmdir("/.old-root")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


# ---- privileges ------------------------------------------------------------------------


def _drop_privileges(as_root: bool) -> None:
    """No way back: bounding set emptied, ambient cleared, no_new_privs; as
    root, become `nobody`; in a user namespace, drop every capability."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    _libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
    if as_root:
        user = pwd.getpwnam(UNPRIVILEGED)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    else:
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3, this thread
        data = (ctypes.c_uint32 * 6)()                          # effective, permitted, inheritable = 0
        _check(_libc.syscall(_SYS_CAPSET, header, data), "drop capabilities")
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")


def _close_fds(keep: set[int]) -> None:
    """Close every descriptor but `keep`. Not through /proc: pivot_root moves
    the root of every process in the mount namespace, the waiting caller's
    too, and the new /proc does not show it."""
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = top if 0 < top < 1 << 20 else 1 << 16
    start = 0
    for fd in sorted(keep) + [top]:
        if fd > start:              # os.closerange(n, n) would close everything from n up
            os.closerange(start, fd)
        start = fd + 1


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _enter_namespaces(as_root: bool) -> None:
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if not as_root:
        flags |= CLONE_NEWUSER
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")
    if not as_root:                                    # we are root in here, nobody else exists
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def confine(submission: str | None, keep: tuple[int, ...], namespaces: bool, scratch_in: str | None = None) -> None:
    """Wall in the calling process (single-threaded: fork it first if it
    might not be). Returns in the student's process only; with namespaces,
    the caller's original process waits and exits with the student's status.
    `keep`: the file descriptors the student's process may keep;
    `namespaces`: whether this machine has them (the grader's `walls()`,
    probed once); without them, Landlock where the kernel has it, its
    private temporary folder made in `scratch_in` (default: the staged
    submission's parent, the sandbox's own folder)."""
    if not namespaces:
        _confine_without_namespaces(submission, keep, scratch_in)
        return
    as_root = os.geteuid() == 0
    alive_r, alive_w = os.pipe()       # closed when the caller dies: PID 1 checks it once
    parent = os.getppid()
    _enter_namespaces(as_root)
    # the caller dies with whoever started it (set after unshare, which may clear it)
    die_with_parent()
    if os.getppid() != parent:
        os._exit(137)
    # open everything the root needs in the new mount namespace (a bind source
    # must belong to it), before the tmpfs over /tmp hides what lies there
    sources = {p: _open_source(p) for p in allowed_paths()}
    hidden = _hidden_entries()
    # a site folder with grader entries outside every allowed path (a user's site, PYTHONPATH) is
    # bound whole, to mask its grader entries in place as well
    sites = {d: _open_source(d) for d in hidden if not any(d.is_relative_to(p) for p in allowed_paths())}
    sub_fd = os.open(submission, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW) if submission else None
    init = os.fork()
    if init:                                            # the caller: waits, mirrors the status
        os.close(alive_r)
        _close_fds({alive_w})
        _, status = os.waitpid(init, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + 9)
    # PID 1: trusted; dies with the caller, and the namespace with it
    try:
        os.close(alive_w)
        die_with_parent()
        if select.select([alive_r], [], [], 0)[0]:     # EOF: the caller died before the prctl
            os._exit(137)
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
        _build_root("/tmp", sources, sub_fd, hidden, sites)
        _pivot("/tmp")
    except BaseException as exc:  # noqa: BLE001 - report a set-up failure, never run student code
        os.write(2, f"shardlab jail: {exc}\n".encode())
        os._exit(125)
    student = os.fork()
    if student:
        _close_fds({alive_r})
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        while True:                                     # reap orphans until the student ends
            try:
                pid, status = os.wait()
            except ChildProcessError:
                os._exit(0)
            if pid == student:
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + 9)
    # PID 2: the student's process
    os.close(alive_r)
    _close_fds(set(keep))
    os.chdir(SUBMISSION if sub_fd is not None else "/tmp")
    _drop_privileges(as_root)
    _fixed_environment("/tmp")
    _filter_system_calls(landlock=False, signals_scoped=True)


# ---- without namespaces: Landlock, rlimits, the filter -----------------------------------

PROCESS_MARGIN = 256              # tasks (threads count) the student may add to its user's
OPEN_FILES = 1024
FILE_BYTES = 64 << 20             # the largest file it may write (the jail's tmpfs holds 64 MiB)


# the whole environment of student code (HOME and TMPDIR are its private folder): nothing of the grader's
STUDENT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _fixed_environment(home: str) -> None:
    """Student code gets STUDENT_ENV and its folder, never what its trusted parent had (the grader's PATH)."""
    os.environ.clear()
    os.environ.update({**STUDENT_ENV, "HOME": home, "TMPDIR": home})
    tempfile.tempdir = None                      # re-read TMPDIR


def _filter_system_calls(landlock: bool, signals_scoped: bool) -> None:
    """The seccomp filter, where libseccomp is installed (`walls()` names its absence)."""
    if syscall_filter.available() is None:
        try:
            syscall_filter.install(landlock, signals_scoped)
        except syscall_filter.FilterError as exc:
            raise JailError(f"system-call filter: {exc}") from None


def _own_tasks() -> int:
    """Tasks (processes and threads) of this real uid now: RLIMIT_NPROC counts them."""
    uid, total = str(os.getuid()), 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
                          if line.startswith(("Uid:", "Threads:")))
        except (OSError, ValueError):
            continue
        if fields.get("Uid", "").split()[:1] == [uid]:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def _limit_resources() -> None:
    """What a cgroup would bound, per process: tasks (for a user other than
    root, whose count the kernel does not check), open files, file size."""
    def cap(limit: int, value: int) -> None:
        soft, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))
    if os.getuid() != 0:
        cap(resource.RLIMIT_NPROC, _own_tasks() + PROCESS_MARGIN)
    cap(resource.RLIMIT_NOFILE, OPEN_FILES)
    cap(resource.RLIMIT_FSIZE, FILE_BYTES)
    cap(resource.RLIMIT_CORE, 0)


def landlock_rules(submission: str | None, scratch: str) -> landlock.Rules:
    """The jail root's allow-list as Landlock rules: read the system, the
    interpreter's prefixes (their site-packages without the grader's
    distribution), /proc and the submission; write the scratch folder."""
    read = [*allowed_paths(), Path("/proc")] + ([Path(submission)] if submission else [])
    left_out = {d: set(entries) for d, entries in grader_site_entries().items()}
    return landlock.Rules(read=read, write=[Path(scratch)], read_except=left_out)


def _confine_without_namespaces(submission: str | None, keep: tuple[int, ...], scratch_in: str | None) -> None:
    _close_fds(set(keep))
    version = 0
    if landlock.abi() > 0:
        if len(os.listdir("/proc/self/task")) != 1:
            raise JailError("Landlock walls only the calling thread: confine a single-threaded process")
        parent = scratch_in or (os.path.dirname(os.path.abspath(submission)) if submission else None)
        scratch = tempfile.mkdtemp(prefix="tmp-", dir=parent)
        _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
        try:
            version = landlock.restrict(landlock_rules(submission, scratch))
        except landlock.LandlockError as exc:
            raise JailError(str(exc)) from None
        _drop_privileges(as_root=False)              # no capabilities left, even as root
        os.chdir(submission or scratch)
        _fixed_environment(scratch)
    _limit_resources()
    # below ABI 6 Landlock scopes no signals: the filter refuses every signal to another process
    _filter_system_calls(landlock=True, signals_scoped=version >= landlock.SIGNAL_SCOPING_ABI)


# ---- cgroups ---------------------------------------------------------------------------


def _cgroup_mounts() -> dict[str, str]:
    """controller (or 'unified') -> mount point, from /proc/self/mountinfo."""
    out: dict[str, str] = {}
    try:
        lines = open("/proc/self/mountinfo").read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype, _, options = right.split(" ")[:3]
        point = left.split(" ")[4]
        if fstype == "cgroup2":
            out.setdefault("unified", point)
        elif fstype == "cgroup":
            for opt in options.split(","):
                if opt in ("memory", "pids", "cpu"):
                    out.setdefault(opt, point)
    return out


def _own_cgroup(controller: str) -> str:
    for line in open("/proc/self/cgroup").read().splitlines():
        _, names, path = line.split(":", 2)
        if (controller == "unified" and names == "") or controller in names.split(","):
            return path
    return "/"


# how long a grader waits for what it killed to be gone (a loaded machine delivers SIGKILL late: at load 15 to 46
# ranks of a finished grading were seen alive); past it, what is still there is named, never taken for gone
KILL_WAIT_SECONDS = 20.0


def kill_until_gone(members, seconds: float) -> list[int]:
    """SIGKILL every pid `members()` lists, again (pausing 2 ms, doubling to 50 ms) until it lists none
    or `seconds` have passed; returns the survivors then (none, unless the machine cannot kill them in
    that time). A cgroup's members and a session's both leave their list only as they exit."""
    deadline, pause = time.monotonic() + seconds, 0.002
    while (alive := members()):
        if time.monotonic() > deadline:
            return alive
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(pause)
        pause = min(0.05, pause * 2)
    return []


@dataclass
class Cgroup:
    """One sandbox's cgroups: v2 (where `cgroup.kill` lives) and the v1
    memory, pids and cpu hierarchies of a hybrid system, whichever exist.
    Created by the grader; `add(pid)` before the process runs student code;
    `kill()` then `remove()` when grading returns."""

    dirs: dict[str, str]

    @classmethod
    def create(cls, memory_bytes: int, pids: int = 512, cpus: float | None = None) -> "Cgroup | None":
        """None where this machine has no per-sandbox cgroups (`walls()`)."""
        if not walls().cgroup:
            return None
        name = f"shardlab-{os.getpid()}-{os.urandom(4).hex()}"
        dirs = {}
        for controller, point in _cgroup_mounts().items():
            d = os.path.join(point + _own_cgroup(controller), name)
            try:
                os.mkdir(d, 0o700)
            except OSError:
                continue
            dirs[controller] = d
        group = cls(dirs)
        group._limit(memory_bytes, pids, cpus)
        return group

    def _set(self, controller: str, file: str, value: str) -> bool:
        d = self.dirs.get(controller)
        if d and os.path.exists(os.path.join(d, file)):
            try:
                _write(os.path.join(d, file), value)
                return True
            except OSError:
                return False
        return False

    def _limit(self, memory_bytes: int, pids: int, cpus: float | None) -> None:
        self._set("unified", "memory.max", str(memory_bytes)) or self._set("memory", "memory.limit_in_bytes",
                                                                         str(memory_bytes))
        self._set("unified", "memory.swap.max", "0") or self._set("memory", "memory.memsw.limit_in_bytes",
                                                                 str(memory_bytes))
        self._set("unified", "pids.max", str(pids)) or self._set("pids", "pids.max", str(pids))
        if cpus:
            period = 100_000
            self._set("unified", "cpu.max", f"{int(cpus * period)} {period}") or (
                self._set("cpu", "cpu.cfs_period_us", str(period))
                and self._set("cpu", "cpu.cfs_quota_us", str(int(cpus * period))))

    def add(self, pid: int) -> None:
        for d in self.dirs.values():
            _write(os.path.join(d, "cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        """Every process in the cgroup or a cgroup nested in it."""
        out: set[int] = set()
        for d in self.dirs.values():
            for top, _, _ in os.walk(d):
                try:
                    out.update(int(p) for p in open(os.path.join(top, "cgroup.procs")).read().split())
                except OSError:
                    pass
        return out

    def kill(self) -> None:
        """Everything in the cgroup dies: `cgroup.kill` (v2), else SIGKILL to
        every member until none is left (a fork bomb is bounded by pids.max);
        returns once none is (a process leaves cgroup.procs as it exits), or
        after KILL_WAIT_SECONDS with survivors, which `remove` then names."""
        self._set("unified", "cgroup.kill", "1")
        kill_until_gone(self.pids, KILL_WAIT_SECONDS)

    def remove(self) -> None:
        """Remove the cgroup's folders, the cgroups nested in them first (a grader that ran
        inside another's cgroup made its own under it: the parent cannot go before them), each
        retried for up to a second while its killed members finish dying."""
        for d in self.dirs.values():
            nested = [top for top, _, _ in os.walk(d, topdown=False)]     # children before parents
            for folder in nested:
                for _ in range(100):
                    try:
                        os.rmdir(folder)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.01)

    @classmethod
    def left_by(cls, grader_pid: int | None) -> list["Cgroup"]:
        """The cgroups a grader with this pid created (`create` names them
        shardlab-<pid>-<random>; any grader's with None) that still exist,
        under this process's own cgroup in each hierarchy (a batch's graders
        share their parent's)."""
        start = "shardlab-" if grader_pid is None else f"shardlab-{grader_pid}-"
        found: dict[str, dict[str, str]] = {}
        for controller, point in _cgroup_mounts().items():
            parent = point + _own_cgroup(controller)
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            for name in names:
                if name.startswith(start):
                    found.setdefault(name, {})[controller] = os.path.join(parent, name)
        return [cls(dirs) for dirs in found.values()]

    def memory_peak(self) -> int | None:
        for controller, file in (("unified", "memory.peak"), ("memory", "memory.max_usage_in_bytes")):
            d = self.dirs.get(controller)
            if d and os.path.exists(os.path.join(d, file)):
                try:
                    return int(open(os.path.join(d, file)).read())
                except (OSError, ValueError):
                    pass
        return None


# ---- what this machine offers ------------------------------------------------------------


LEVELS = ("full", "namespaces", "landlock", "none")


@dataclass(frozen=True)
class Walls:
    """What isolation this machine gives student code, probed once per process.

    `namespaces`: user/pid/mount/net/ipc namespaces and a private root
    (root, or unprivileged user namespaces); `cgroup`: a cgroup per sandbox
    (memory, pids, cpu; killed as a whole); `landlock`: without namespaces,
    Landlock's file and network rules stand in for the private root;
    `syscall_filter`: the seccomp filter. `missing` has one line per wall
    that is absent, saying why. `full` is every wall up.

    `level`, from most walled to least: full; namespaces (no cgroup, or no
    filter); landlock (no namespaces); none (student code runs as the
    grader's user, with the grader's files in view)."""

    namespaces: bool
    cgroup: bool
    missing: tuple[str, ...] = ()
    landlock: bool = False
    syscall_filter: bool = False

    @property
    def full(self) -> bool:
        return self.namespaces and self.cgroup and not self.missing

    @property
    def level(self) -> str:
        if self.full:
            return "full"
        return "namespaces" if self.namespaces else "landlock" if self.landlock else "none"

    def describe(self) -> str:
        missing = "; ".join(self.missing)
        return {"full": "full walls: own namespaces and private root, unprivileged, own cgroup, "
                        "system-call filter",
                "namespaces": f"lighter walls ({missing})",
                "landlock": f"lighter walls: Landlock instead of namespaces ({missing})",
                "none": f"no walls: student code ran as the grader's user, with its files in view ({missing})",
                }[self.level]


# test-only: SHARDLAB_NO_JAIL=1 makes `walls()` find no namespaces, so that tests take the Landlock
# path on a machine that has both (tests/test_attacks_landlock.py); it can only lower the walls, and
# the grading policy (`sandbox.walls`) refuses what it lowers them to unless the course says otherwise
NO_NAMESPACES_ENV = "SHARDLAB_NO_JAIL"


def _trial(namespaces: bool, scratch_in: str | None = None) -> str | None:
    """None if a trial sandbox (namespaces, or Landlock) sees only what it
    should and filters system calls where libseccomp is installed; else why not."""
    hidden = Path(__file__).resolve().parents[2] / "reference"     # the source tree's, or the wheel's
    outside = os.path.join(scratch_in or "/", "outside")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # a trial sandbox
        try:
            os.close(read_fd)
            confine(None, keep=(write_fd,), namespaces=namespaces, scratch_in=scratch_in)
            seen = _trial_answer(hidden, outside if not namespaces else None)
            os.write(write_fd, seen.encode()[:300])
        except BaseException as exc:  # noqa: BLE001
            os.write(write_fd, str(exc).encode()[:300])
        os._exit(0)
    os.close(write_fd)
    answer = b""
    while chunk := os.read(read_fd, 4096):
        answer += chunk
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if answer == b"ok":
        return None
    status_text = f"exit status {os.waitstatus_to_exitcode(status)}"
    return answer.decode("utf-8", "replace") or f"a trial sandbox failed ({status_text})"


def _trial_answer(hidden: Path, outside: str | None) -> str:
    """What a trial sandbox sees: "ok", or what is wrong."""
    if not (os.path.exists("/etc/passwd") and os.path.isdir("/proc/self")):
        return "the trial sandbox cannot see the system it needs"
    try:
        open(hidden / "__init__.py", "rb").close()
        return "the trial sandbox can read the grader's reference"
    except OSError:
        pass
    if outside is not None:
        try:
            open(outside, "w").close()
            return "the trial sandbox can write outside its folder"
        except OSError:
            pass
    if syscall_filter.available() is None and "Seccomp:\t2" not in open("/proc/self/status").read():
        return "the trial sandbox has no system-call filter"
    return "ok"


def _probe_namespaces() -> str | None:
    """None if a trial sandbox builds its root and sees only what it should; else why not."""
    if not sys.platform.startswith("linux"):
        return f"no namespaces on {sys.platform}"
    if os.environ.get(NO_NAMESPACES_ENV) == "1":
        return f"namespaces turned off ({NO_NAMESPACES_ENV}=1, a test's switch)"
    if _SYS_PIVOT_ROOT is None or _SYS_CAPSET is None:
        return f"no namespaces: unsupported machine {os.uname().machine}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(UNPRIVILEGED)
        except KeyError:
            return f"no namespaces: no user {UNPRIVILEGED!r} to run student code as"
    why = _trial(namespaces=True)
    if why is None:
        return None
    if why.startswith("a trial sandbox failed"):
        why += "; unprivileged user namespaces off?"
    return f"no namespaces: {why}"


def _probe_landlock() -> str | None:
    """None if a trial process restricted by Landlock sees only what it should; else why not."""
    why = landlock.unavailable()
    if why:
        return why
    import shutil
    folder = tempfile.mkdtemp(prefix=f"shardlab-{os.getpid()}-probe-")
    try:
        why = _trial(namespaces=False, scratch_in=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return None if why is None else f"no Landlock: {why}"


def _probe_syscall_filter() -> str | None:
    why = syscall_filter.available()
    return None if why is None else f"no system-call filter: {why}"


def _probe_cgroup() -> str | None:
    mounts = _cgroup_mounts()
    if os.geteuid() != 0:
        return "no per-sandbox cgroup: the grader is not root"
    if not mounts:
        return "no per-sandbox cgroup: no cgroup file system mounted"
    trial = Cgroup({})
    try:
        for controller, point in mounts.items():
            d = os.path.join(point + _own_cgroup(controller), f"shardlab-probe-{os.getpid()}")
            os.mkdir(d)
            trial.dirs[controller] = d
        files = {f for d in trial.dirs.values() for f in os.listdir(d)}
        if not ({"memory.max", "memory.limit_in_bytes"} & files and "pids.max" in files):
            return "no per-sandbox cgroup: no memory or pids controller"
        return None
    except OSError as exc:
        return f"no per-sandbox cgroup: {exc.strerror}"
    finally:
        trial.remove()


@lru_cache(maxsize=1)
def walls() -> Walls:
    """Probed once per process: a trial sandbox (namespaces; Landlock only
    where they are missing), a trial cgroup, the system-call filter."""
    ns = _probe_namespaces()
    ll = _probe_landlock() if ns else None
    cg, sf = _probe_cgroup(), _probe_syscall_filter()
    return Walls(namespaces=ns is None, cgroup=cg is None, missing=tuple(w for w in (ns, ll, cg, sf) if w),
                 landlock=ns is not None and ll is None, syscall_filter=sf is None)


def stage(root: str | Path, into: Path) -> Path:
    """A copy of the submission's assignments/ that the sandbox can read
    (`staging.stage`: never follows links)."""
    from shardlab.autograder.sandbox.staging import stage as stage_without_links
    return stage_without_links(Path(root), into)
