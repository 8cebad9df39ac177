"""The system-call filter of every process that runs student code (seccomp).

Defense in depth behind the jail (`jail.confine` installs it last, after the
trusted set-up and before the first student import): kernel interfaces a
grading never needs answer EPERM, so a kernel bug behind one of them is out
of a submission's reach. The list follows Docker's default profile (what it
leaves to CAP_SYS_ADMIN or denies outright) and nsjail's:

- asynchronous and programmable kernel interfaces: `io_uring_*`, `bpf`,
  `userfaultfd`, `perf_event_open`;
- the kernel keyring: `keyctl`, `add_key`, `request_key`;
- other processes' memory and state: `ptrace`, `process_vm_readv/writev`,
  `kcmp`, `pidfd_getfd`;
- the machine: `kexec_*`, module loading, `reboot`, `swapon/swapoff`, the
  clocks, `acct`, `quotactl`, `syslog`, `iopl/ioperm`;
- the walls themselves: `unshare`, `setns`, `clone` with a namespace flag,
  `mount`, `umount2`, `pivot_root`, `chroot`, the new mount API,
  `open_by_handle_at` (the "shocker" container escape). `clone3` answers
  ENOSYS instead, as in Docker: its flags are behind a pointer no filter can
  read, and ENOSYS makes the C library fall back to `clone`.

Every jail also refuses `socket` and `socketpair` for AF_NETLINK, AF_PACKET
and AF_VSOCK (`FOREIGN_FAMILIES`): the kernel's routing and audit sockets,
raw frames and the host's virtual sockets, none of which a grading needs.

Where Landlock stands in for namespaces (`install(landlock=...)`), the
student's process keeps the grader's uid and sees the grader's files, so the
filter also refuses (docs/trust.md, "Without namespaces"):

- `socket` for AF_UNIX
  (a path name reaches the grader's own sockets; Landlock checks no socket
  connect) and AF_INET/AF_INET6 (Landlock ABI < 4 has no network rules), and
  `socketpair` for AF_UNIX: a datagram pair can `sendto` or `connect` any
  socket path outside, the one way to a Unix socket left once `socket` is shut;
- a file's metadata (`METADATA`): modes, owners, times, extended attributes,
  inode flags (the `FS_IOC_SETFLAGS`/`FS_IOC_FSSETXATTR` ioctls) and a
  truncate by path. Landlock rules none of these (a truncate only from ABI 3),
  and a process with the grader's uid may change them on every file the
  grader owns: `~/.ssh`, the data seed keys, another student's upload. seccomp
  cannot read a path, so they are denied outright, inside the private folder
  too: student code needs none of them (no user notification);
- reaching a process of the grader's in other ways than a signal: `prlimit64`
  on another process, `setpriority` and the scheduler calls on another;
- where Landlock's ABI is below 6 (no signal scoping: Ubuntu 24.04's stock
  kernel has 4), every signal but to itself (`kill`, `tgkill`,
  `rt_sigqueueinfo`, `rt_tgsigqueueinfo` to another process, `tkill`,
  `pidfd_send_signal`), and `fcntl(F_SETOWN)` and its ioctls, which would
  have the kernel signal a chosen process on I/O. The pid compared is the
  process's own when the filter is installed, so a child it forks may signal
  nothing at all: student code needs no signals.

A system call newer than the installed libseccomp knows is added by its
number (`NEW_CALLS`: the same on every architecture since Linux 5.1).

It goes through libseccomp (`libseccomp.so.2`, on every Debian and Ubuntu
image, Gradescope's included) with ctypes: no package to pin. Where the
library is missing, `available()` says why and the jail goes on without a
filter; `jail.walls()` names it as a missing wall.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import socket
from collections.abc import Iterator
from functools import lru_cache

# seccomp.h
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 1, 4, 7


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)          # SCMP_ACT_ERRNO(code)


DENIED = (
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "bpf", "userfaultfd", "perf_event_open",
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "open_by_handle_at", "lookup_dcookie", "uselib",
)
# linux/sched.h: a clone with any of these makes a namespace (NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID,
# NEWNET, NEWCGROUP; NEWTIME is unshare's and clone3's only: in clone's flags its bit is the exit signal's)
NAMESPACE_FLAGS = (0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x02000000)
AF_VSOCK = 40
FOREIGN_FAMILIES = (socket.AF_NETLINK, socket.AF_PACKET, AF_VSOCK)      # refused in every jail
LANDLOCK_EXTRA_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)
# a file's metadata: refused behind Landlock (module docstring)
METADATA = (
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
    "utime", "utimes", "utimensat", "futimesat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat", "file_setattr", "truncate",
)
# linux/fs.h: FS_IOC_SETFLAGS, its 32-bit twin, FS_IOC_FSSETXATTR; linux/sockios.h, asm/sockios.h: FIOSETOWN,
# SIOCSPGRP
METADATA_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)
SETOWN_IOCTLS = (0x8901, 0x8902)
F_SETOWN, F_SETOWN_EX = 8, 15
# calls the installed libseccomp may not know yet, by number (asm-generic/unistd.h; one table for every
# architecture from 424 on)
NEW_CALLS = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469}
INT32 = 0xFFFFFFFF        # an int argument: the kernel reads its low 32 bits only, so compare those


class FilterError(Exception):
    """The filter could not be built or loaded (a set-up problem, never the student's)."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | str:
    """libseccomp, or why it cannot be had. Its usual name first: `find_library` runs
    `ldconfig -p` in a subprocess, which every jailed process paid before its filter."""
    for name in _names():
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(_ArgCmp)]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        return lib
    return "libseccomp.so.2 is not installed (apt-get install libseccomp2)"


def _names() -> Iterator[str | None]:
    yield "libseccomp.so.2"
    yield ctypes.util.find_library("seccomp")      # only if the usual name did not load


def available() -> str | None:
    """None when the filter can be installed here; else why not."""
    lib = _library()
    return lib if isinstance(lib, str) else None


def syscall_number(name: str) -> int:
    """This machine's number of the system call `name` (negative: none here)."""
    lib = _library()
    if isinstance(lib, str):
        raise FilterError(lib)
    return lib.seccomp_syscall_resolve_name(name.encode())


def install(landlock: bool = False, signals_scoped: bool = True) -> None:
    """Filter the calling thread and everything it starts from now on (needs
    no_new_privs or CAP_SYS_ADMIN). `landlock`: Landlock is the wall, not
    namespaces (the module docstring's second list); `signals_scoped`: its
    ABI scopes signals (>= 6), else signals to other processes are refused.
    Raises FilterError."""
    lib = _library()
    if isinstance(lib, str):
        raise FilterError(lib)
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise FilterError("seccomp_init failed")
    try:
        rule = _rule_adder(lib, ctx)
        _every_jail(rule)
        if landlock:
            _behind_landlock(rule)
            if not signals_scoped:
                _no_signals_out(rule, os.getpid())
        result = lib.seccomp_load(ctx)
        if result != 0:
            raise FilterError(f"seccomp_load: {errno.errorcode.get(-result, result)}")
    finally:
        lib.seccomp_release(ctx)


Compare = tuple[int, int, int, int]        # (argument, SCMP_CMP_*, datum a, datum b)


def _rule_adder(lib, ctx):
    """`rule(action, name, *compares)`: add one rule; a call this architecture lacks is skipped."""
    def rule(action: int, name: str, *compares: Compare) -> None:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            number = NEW_CALLS.get(name, -1)
        if number < 0:                           # not a system call of this architecture
            return
        args = (_ArgCmp * max(1, len(compares)))(*(_ArgCmp(*c) for c in compares))
        result = lib.seccomp_rule_add_array(ctx, action, number, len(compares), args)
        if result != 0:
            raise FilterError(f"seccomp rule for {name}: {errno.errorcode.get(-result, result)}")
    return rule


def _int_is(arg: int, value: int) -> Compare:
    """Argument `arg`, an int to the kernel, equals `value` (its low 32 bits: a caller's high bits are ignored
    by the kernel, so they must be by the filter too)."""
    return (arg, SCMP_CMP_MASKED_EQ, INT32, value & INT32)


def _every_jail(rule) -> None:
    deny = _errno_action(errno.EPERM)
    for name in DENIED:
        rule(deny, name)
    for flag in NAMESPACE_FLAGS:                 # clone(flags, ...) with a namespace flag: arg 0 & flag
        rule(deny, "clone", (0, SCMP_CMP_MASKED_EQ, flag, flag))
    rule(_errno_action(errno.ENOSYS), "clone3")
    for family in FOREIGN_FAMILIES:
        rule(deny, "socket", _int_is(0, family))
        rule(deny, "socketpair", _int_is(0, family))


def _behind_landlock(rule) -> None:
    deny = _errno_action(errno.EPERM)
    for family in LANDLOCK_EXTRA_FAMILIES:
        rule(deny, "socket", _int_is(0, family))
    rule(deny, "socketpair", _int_is(0, socket.AF_UNIX))
    for name in METADATA:
        rule(deny, name)
    for request in METADATA_IOCTLS:
        rule(deny, "ioctl", _int_is(1, request))
    # another process's limits, niceness, scheduling (pid 0 is the caller itself)
    # (compared in all 64 bits: only 0 exactly passes, which the kernel reads as 0)
    rule(deny, "prlimit64", (0, SCMP_CMP_NE, 0, 0), (2, SCMP_CMP_NE, 0, 0))      # setting another's limits
    rule(deny, "setpriority", (1, SCMP_CMP_NE, 0, 0))
    for name in ("sched_setscheduler", "sched_setparam", "sched_setattr"):
        rule(deny, name, (0, SCMP_CMP_NE, 0, 0))


def _no_signals_out(rule, own_pid: int) -> None:
    """Signals to this process only (Landlock ABI < 6: module docstring). A pid is compared in all its 64 bits
    (SCMP_CMP_NE): only `own_pid` exactly passes, which the kernel reads as `own_pid`."""
    deny = _errno_action(errno.EPERM)
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rule(deny, name, (0, SCMP_CMP_NE, own_pid, 0))
    rule(deny, "tkill")
    rule(deny, "pidfd_send_signal")
    for command in (F_SETOWN, F_SETOWN_EX):
        rule(deny, "fcntl", _int_is(1, command))
    for request in SETOWN_IOCTLS:
        rule(deny, "ioctl", _int_is(1, request))
