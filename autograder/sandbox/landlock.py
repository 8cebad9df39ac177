"""Landlock: file and network walls without namespaces (Linux >= 5.13).

Where user namespaces are refused (a non-root instructor on Ubuntu >= 23.10,
Debian with `kernel.unprivileged_userns_clone=0`, a container without
CAP_SYS_ADMIN), the student's process restricts itself
(`jail.confine`): it may then

- read only beneath the rules it was given (the jail root's allow-list:
  system folders, the interpreter's prefixes with their site-packages minus
  the grader's distribution, the staged submission, /proc);
- write, create and remove only beneath its private temporary folder, and
  read and write the harmless character devices (/dev/null, ...);
- make no TCP connection and bind no TCP port (ABI >= 4);
- send no signal to, and reach no abstract Unix socket of, a process outside
  its own domain (ABI >= 6).

Landlock restricts the calling thread and what it starts afterwards, and
cannot be lifted; `restrict_self` needs no_new_privs. The three system
calls go through ctypes (they are the same numbers on every architecture).
Kernel ABI and structures: include/uapi/linux/landlock.h.
"""
from __future__ import annotations

import ctypes
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

# LANDLOCK_ACCESS_FS_*, with the ABI that introduced each
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15          # ABI 2, 3, 5
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV   # what a rule on a non-folder may hold
# LANDLOCK_ACCESS_NET_* (ABI 4), LANDLOCK_SCOPE_* (ABI 6)
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)


class LandlockError(Exception):
    """The rules could not be built or enforced (a set-up problem, never the student's)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


SIGNAL_SCOPING_ABI = 6          # LANDLOCK_SCOPE_SIGNAL and the abstract Unix socket scope
# test-only: SHARDLAB_LANDLOCK_ABI=N makes the walls use at most ABI N, so the tests reach every ABI the walls
# accept on one kernel (tests/test_attacks_landlock_walls.py); it can only lower what the kernel offers
ABI_CAP_ENV = "SHARDLAB_LANDLOCK_ABI"


def abi() -> int:
    """The Landlock ABI version the walls use: the kernel's (capped by ABI_CAP_ENV); 0 where there is none
    (old kernel, Landlock not among the boot's LSMs, not Linux, or a filter refusing the call)."""
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return 0
    version = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    cap = os.environ.get(ABI_CAP_ENV, "")
    return max(0, min(version, int(cap)) if cap.isdigit() else version)


def unavailable() -> str | None:
    """None where Landlock can be used; else why not, in one phrase."""
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return "no Landlock: not Linux"
    if abi() > 0:
        return None
    err = ctypes.get_errno()
    if err == 95:                                     # EOPNOTSUPP: built in, not enabled at boot
        return "no Landlock: not enabled at boot (add landlock to the kernel's lsm= list)"
    return f"no Landlock: the kernel offers none ({os.uname().release}; it needs Linux >= 5.13)"


@dataclass
class Rules:
    """Folders and files to read beneath, folders to write beneath, and
    folders some of whose entries only may be read (`read_except`: folder ->
    names left out, the grader's distribution in site-packages)."""

    read: list[Path] = field(default_factory=list)
    write: list[Path] = field(default_factory=list)
    read_except: dict[Path, set[str]] = field(default_factory=dict)


def _expand(rules: Rules) -> list[tuple[Path, int]]:
    """(path, access) pairs for the kernel: a read rule on a folder that
    holds a `read_except` folder becomes rules on each of its entries but the
    way down, so what is left out stays out (a Landlock rule grants a whole
    hierarchy; nothing beneath can take it back). The folders on the way
    down may be listed, not read: what is left out shows its names only."""
    holes = {os.path.realpath(p): names for p, names in rules.read_except.items()}
    out: list[tuple[Path, int]] = []
    done: set[str] = set()                          # a folder reached twice (a venv's lib64 -> lib)

    def allow(real: str) -> None:                   # `real`: a resolved path
        if real in done:
            return
        done.add(real)
        if not any(h == real or h.startswith(real.rstrip("/") + "/") for h in holes):
            out.append((Path(real), READ))
            return
        out.append((Path(real), READ_DIR))       # listed (Python's importer lists every folder on its path)
        left_out = holes.get(real, set())
        try:
            with os.scandir(real) as entries:
                for entry in entries:
                    if entry.name not in left_out:
                        allow(os.path.realpath(entry.path) if entry.is_symlink() else entry.path)
        except OSError:
            return
    for path in rules.read:
        allow(os.path.realpath(path))
    out += [(p, READ | FS_BY_ABI[5]) for p in rules.write]
    return out


def restrict(rules: Rules) -> int:
    """Enforce `rules` on the calling thread for good; returns the ABI used.
    The caller has set no_new_privs and is single-threaded."""
    version = abi()
    if version < 1:
        raise LandlockError(unavailable() or "no Landlock")
    handled_fs = FS_BY_ABI[min(version, 5)]
    attr = _RulesetAttr(handled_fs, BIND_TCP | CONNECT_TCP if version >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    ruleset = _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        devices = [(Path(d), READ_FILE | WRITE_FILE | TRUNCATE) for d in DEVICES if os.path.exists(d)]
        for path, access in _expand(rules) + devices:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue                             # gone meanwhile: nothing to allow
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= FILE_ONLY
                beneath = _PathBeneathAttr(access & handled_fs, fd)
                if _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(beneath),
                                 ctypes.c_uint32(0)) != 0:
                    raise LandlockError(f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        if _libc.syscall(SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise LandlockError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return version
