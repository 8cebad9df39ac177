"""Unix stream sockets at a path of any length (`bind`, `connect`).

A socket's path must fit in 107 bytes (`sockaddr_un.sun_path`), and the
grader makes its sockets in its temporary folder: a gloo group's in
`shardlab-<pid>-g-<random>/ctl.sock`, a batch's zygote's in
`shardlab-<pid>-zygote-<random>/zygote.sock`. Under a long TMPDIR (a CI
runner's, a test's temporary folder) the whole path passes the limit and
every gloo part would fail. A longer path is reached through the folder's
descriptor instead, `/proc/self/fd/<n>/<name>`, which the kernel resolves to
the same file: the socket is made where the path says, and any process that
can open the folder can connect to it.
"""
from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

MAX_PATH_BYTES = 107


@contextlib.contextmanager
def _short(path: str) -> Iterator[str]:
    """`path` itself when it fits, else its name under its folder's descriptor (open for the block)."""
    if len(os.fsencode(path)) <= MAX_PATH_BYTES:
        yield path
        return
    folder = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{folder}/{os.path.basename(path)}"
    finally:
        os.close(folder)


def bind(sock: socket.socket, path: str) -> None:
    with _short(path) as reachable:
        sock.bind(reachable)


def connect(sock: socket.socket, path: str) -> None:
    with _short(path) as reachable:
        sock.connect(reachable)
