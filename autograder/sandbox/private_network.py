"""A network of the grading's own: the calling process moved into a fresh
network namespace whose loopback is up, so every process it starts later
(the zygote, the fork servers, the gloo ranks) binds and connects its TCP
ports there, apart from every other process of the machine.

Why (docs/gradescope.md, "No race with otter's kernel"): on Gradescope,
run_autograder starts the grading before otter starts its Jupyter kernel.
jupyter_client picks the kernel's five ports (free ones, then closed) a
second or more before the kernel binds them, and the gloo ranks bind and
connect hundreds of ports of the same ephemeral range; in one namespace,
one taken in between kills the kernel. In a namespace of its own, the
grading's 127.0.0.1 is another loopback, with ports of its own: there is
nothing to collide with. Needs CAP_SYS_ADMIN (root; Gradescope runs
run_autograder as root); elsewhere `enter` says no and changes nothing.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914      # linux/sockios.h
IFF_UP = 0x1
_IFREQ = "16sH14x"                              # struct ifreq: the name, then ifr_flags (a short)

_libc = ctypes.CDLL(None, use_errno=True)


def enter() -> str | None:
    """Move this process into a new network namespace with its loopback up.
    Returns None when done, else why not (not root, or the kernel or a
    container's policy refuses it), in which case nothing changed."""
    if os.geteuid() != 0:
        return "not root"
    before = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.unshare(ctypes.c_int(CLONE_NEWNET)) != 0:
            return f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}"
        try:
            loopback_up()
        except OSError as exc:      # no loopback, no gloo: back to the namespace it came from
            _libc.setns(ctypes.c_int(before), ctypes.c_int(CLONE_NEWNET))
            return f"bringing up the loopback of a new network namespace: {exc.strerror}"
        return None
    finally:
        os.close(before)


def loopback_up() -> None:
    """Set IFF_UP on `lo` (a new namespace's loopback has 127.0.0.1 and ::1, but is down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        name, flags = struct.unpack(_IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0)))
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | IFF_UP))
