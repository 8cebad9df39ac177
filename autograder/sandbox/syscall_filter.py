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

`LANDLOCK_EXTRA` adds, where Landlock stands in for namespaces
(`jail.confine`), `socket` for the families that reach outside the process:
AF_UNIX (a path name reaches the grader's own sockets; Landlock checks no
socket connect) and AF_INET/AF_INET6 (Landlock ABI < 4 has no network rules).

It goes through libseccomp (`libseccomp.so.2`, on every Debian and Ubuntu
image, Gradescope's included) with ctypes: no package to pin. Where the
library is missing, `available()` says why and the jail goes on without a
filter; `jail.walls()` names it as a missing wall.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import socket
from collections.abc import Iterator
from functools import lru_cache

# seccomp.h
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 4, 7


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
LANDLOCK_EXTRA_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)


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


def install(landlock_extra: bool = False) -> None:
    """Filter the calling thread and everything it starts from now on (needs
    no_new_privs or CAP_SYS_ADMIN). `landlock_extra`: also refuse sockets
    of LANDLOCK_EXTRA_FAMILIES. Raises FilterError."""
    lib = _library()
    if isinstance(lib, str):
        raise FilterError(lib)
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise FilterError("seccomp_init failed")
    deny = _errno_action(errno.EPERM)
    try:
        def rule(action: int, name: str, *compares: tuple[int, int, int, int]) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:                           # not a system call of this architecture
                return
            args = (_ArgCmp * max(1, len(compares)))(*(_ArgCmp(*c) for c in compares))
            result = lib.seccomp_rule_add_array(ctx, action, number, len(compares), args)
            if result != 0:
                raise FilterError(f"seccomp rule for {name}: {errno.errorcode.get(-result, result)}")
        for name in DENIED:
            rule(deny, name)
        for flag in NAMESPACE_FLAGS:                 # clone(flags, ...) with a namespace flag: arg 0 & flag
            rule(deny, "clone", (0, SCMP_CMP_MASKED_EQ, flag, flag))
        rule(_errno_action(errno.ENOSYS), "clone3")
        if landlock_extra:
            for family in LANDLOCK_EXTRA_FAMILIES:
                rule(deny, "socket", (0, SCMP_CMP_EQ, family, 0))
        result = lib.seccomp_load(ctx)
        if result != 0:
            raise FilterError(f"seccomp_load: {errno.errorcode.get(-result, result)}")
    finally:
        lib.seccomp_release(ctx)
