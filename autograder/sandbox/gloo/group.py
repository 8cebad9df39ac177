"""The grader's side of the gloo harness: the fork server and worker groups.
(`gloo.launch` runs them for the grading engine.)

One fork server per submission (forked from the zygote, which has imported
torch and nothing else runs in it), in the
submission's sandbox (`sandbox.Sandbox`: the staged copy and a cgroup
killed whole at the end); per world size one worker group of ranks
forked from it, reused by every scenario of that submission. Each rank is a
trusted process plus the student's walled-in process (`ranks.main`,
docs/trust.md). The trusted processes rendezvous through a FileStore in a
fresh temp dir that only the grader can enter (no ports; a stale store file
can hang a rank, so a dir is never reused) and talk to the grader over a
Unix socket in that dir.

Failing fast: every collective has a short timeout (`GlooLimits`), the
trusted ranks check collective fingerprints (`ranks.fingerprint`, as
TORCH_DISTRIBUTED_DEBUG=DETAIL does, on a file they share instead of four
gloo exchanges: a mismatched collective is an error instead of a hang or an
abort), and the
grader enforces an absolute deadline per scenario (no message extends it),
then kills the group. A scenario that fails in any way (an exception on a
rank, a timeout, a rank that died) costs the group: the caller kills it and
asks for a fresh one, unless every rank failed before its first collective.

Use: `ForkServer(root, limits, gloo).spawn(N).run(call, seconds)`, where
`call` names a scenario of `kit.scenarios` and its args.
"""
from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from shardlab.autograder.core import course_folders
from shardlab.autograder.core.phases import phase
from shardlab.autograder.core.parts import Call
from shardlab.autograder.kit.verdict import failure, unfinished
from shardlab.autograder.sandbox.gloo.ranks.board import create_board
from shardlab.autograder.sandbox.gloo.ranks.status import create_status, read_status
from shardlab.autograder.sandbox import zygote
from shardlab.autograder.sandbox import unix_socket
from shardlab.autograder.sandbox.leftovers import private_folder
from shardlab.autograder.sandbox.process import Limits, Outcome, Sandbox, CappedReader, kill_group
from shardlab.autograder.sandbox.zygote import worker_env


@dataclass(frozen=True)
class GlooLimits:
    collective_seconds: float = 3.0     # gloo's own timeout for one collective (default 30 min)
    scenario_seconds: float = 10.0      # wall clock for one scenario on all ranks, then kill
    start_seconds: float = 60.0         # the fork server's torch import
    join_seconds: float = 10.0          # a group's rendezvous (normally ~0.05 s); then one retry
    grace_seconds: float = 0.3          # after a rank fails, time for the others to report
    # the trusted ranks check that the ranks call the same collectives (`ranks.fingerprint`): torch's
    # words for a mismatch or a missing rank, without DETAIL's four gloo exchanges per collective
    fingerprints: bool = True
    debug: str = "OFF"                  # TORCH_DISTRIBUTED_DEBUG ("DETAIL": torch's own fingerprint checks)


GLOO = GlooLimits()
MAX_LINE_BYTES = 64 << 20      # one result line from a trusted rank (a few MB of weights at most)


class GroupError(Exception):
    pass


def _lines(sock: socket.socket, buffer: bytearray) -> list[dict] | None:
    """Read what is available; None at end of stream."""
    chunk = sock.recv(65536)
    if not chunk:
        return None
    buffer.extend(chunk)
    if len(buffer) > MAX_LINE_BYTES and b"\n" not in buffer:
        raise ValueError("a line over the cap")
    return _whole_lines(buffer)


def _whole_lines(buffer: bytearray) -> list[dict]:
    """The complete lines in `buffer`, taken out of it."""
    *lines, rest = bytes(buffer).split(b"\n")
    buffer[:] = rest
    return [json.loads(line) for line in lines if line]


class ForkServer:
    """`modules`: extra scenario modules to load (grading loads only `kit.scenarios`)."""

    def __init__(self, root: str, limits: Limits, gloo: GlooLimits = GLOO, modules: tuple[str, ...] = ()):
        self.limits, self.gloo = limits, gloo
        self.box = Sandbox(root, limits.sandbox_memory_bytes)
        self.root = self.box.root
        self.output, self.printed = bytearray(), [0]
        read_fd, write_fd = os.pipe()
        with phase("start the fork server (the zygote's torch import, waited for)", lane="gloo"):
            self.proc = zygote.start("forkserver", self.box.private,
                                     worker_env(TORCH_DISTRIBUTED_DEBUG=gloo.debug, GLOO_SOCKET_IFNAME="lo"),
                                     (write_fd,))
        os.close(write_fd)
        self.box.admit(self.proc.pid)          # before anything is forked from it
        self.results = os.fdopen(read_fd, "rb")
        self.reader = CappedReader(self.proc.stdout, self.output, self.printed)
        self.reader.start()
        # the course's own scenarios (course folders this grader loaded): instructor code, imported by
        # the server before it forks a rank, as the kit's are (`core.course_folders`)
        first = {"result_fd": write_fd, "modules": list(modules), "files": course_folders.scenario_files()}
        self.proc.stdin.write((json.dumps(first) + "\n").encode())
        self.proc.stdin.flush()
        self.ready = False
        self.lock = threading.Lock()           # one request to the server at a time (groups start from threads)
        self.groups: list[WorkerGroup] = []
        _LIVE.add(self)

    def _reply(self, seconds: float) -> dict:
        sel = selectors.DefaultSelector()
        sel.register(self.results, selectors.EVENT_READ)
        try:
            if not sel.select(seconds):
                raise GroupError(f"the gloo fork server did not answer within {seconds:g} s")
        finally:
            sel.close()
        line = self.results.readline()
        if not line:
            raise GroupError(f"the gloo fork server ended (exit status {self.proc.poll()})")
        return json.loads(line)

    def spawn(self, world_size: int) -> "WorkerGroup":
        """A fresh group. Ranks start before any student code is imported, so a
        start that fails is the harness's (a rare rendezvous stall has been
        seen under load): it is retried once with a fresh group and store."""
        with self.lock:
            if not self.ready:
                with phase("fork server ready", lane="gloo"):
                    self._reply(self.gloo.start_seconds)
                self.ready = True
        for attempt in (1, 2):
            try:
                group = WorkerGroup(self, world_size)
                break
            except GroupError:
                if attempt == 2:
                    raise
        self.groups.append(group)
        return group

    def close(self) -> None:
        for group in self.groups:
            group.kill()
        try:
            kill_group(self.proc)              # the server, and every rank of its session, gone before it returns
        finally:
            self.box.close()                   # the cgroup dies whole: nothing the students started survives
            self.reader.join(timeout=5)
            self.results.close()
            _LIVE.discard(self)


class WorkerGroup:
    """world_size ranks forked from the server, rendezvoused and ready."""

    def __init__(self, server: ForkServer, world_size: int):
        self.server, self.world_size = server, world_size
        # 0700: only the grader and its ranks; a short name: its Unix socket's whole path must fit 108 bytes
        self.dir = private_folder("g")
        self.pids: list[int] = []
        self.socks: list[socket.socket | None] = [None] * world_size
        self.buffers = [bytearray() for _ in range(world_size)]
        self.status = os.path.join(self.dir, "status")       # where each rank is (`ranks.status`)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            unix_socket.bind(listener, os.path.join(self.dir, "ctl.sock"))
            listener.listen(world_size)
            spec = {"world_size": world_size, "root": server.root, "namespaces": server.box.walls.namespaces,
                    "socket": os.path.join(self.dir, "ctl.sock"), "store": os.path.join(self.dir, "store"),
                    "collective_seconds": server.gloo.collective_seconds,
                    "memory_bytes": server.limits.memory_bytes, "status": self.status}
            create_status(self.status, world_size)
            if server.gloo.fingerprints:
                board = os.path.join(self.dir, "board")
                create_board(board, world_size)
                spec["board"] = board
            with server.lock:
                server.proc.stdin.write((json.dumps({"spawn": spec}) + "\n").encode())
                server.proc.stdin.flush()
                self.pids = server._reply(server.gloo.start_seconds)["spawned"]
            self._connect(listener)
        except (OSError, GroupError, ValueError) as exc:
            self.kill()
            raise GroupError(f"could not start {world_size} gloo ranks: {exc}") from None
        finally:
            listener.close()

    def _connect(self, listener: socket.socket) -> None:
        deadline = time.monotonic() + self.server.gloo.join_seconds
        for _ in range(self.world_size):
            listener.settimeout(max(0.01, deadline - time.monotonic()))
            conn, _ = listener.accept()
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            buffer = bytearray()
            while b"\n" not in buffer:
                chunk = conn.recv(4096)
                if not chunk:
                    raise GroupError("a rank closed its connection before saying hello")
                buffer.extend(chunk)
            hello, _, rest = bytes(buffer).partition(b"\n")
            rank = json.loads(hello)["hello"]
            conn.settimeout(None)
            self.socks[rank], self.buffers[rank] = conn, bytearray(rest)
        msgs = self._collect(deadline, set(range(self.world_size)), "ready")
        where, _ = read_status(self.status, self.world_size)
        for rank in range(self.world_size):
            if msgs.get(rank) is not True:
                stuck = f" (stuck in {where[rank]})" if where[rank] else ""
                raise GroupError(f"rank {rank} did not join the process group{stuck}: {msgs.get(rank)}")

    def _sock(self, rank: int) -> socket.socket:
        """The rank's connection: there from `_connect` until `kill`."""
        sock = self.socks[rank]
        assert sock is not None
        return sock

    def _collect(self, deadline: float, pending: set[int], want: str) -> dict[int, Any]:
        """Messages of kind `want` (or 'error'/'died') from the pending ranks
        until the deadline, which no message extends: the "ready" value, else
        (kind, ...) tuples."""
        got: dict[int, Any] = {}
        sel = selectors.DefaultSelector()
        for r in pending:
            sel.register(self._sock(r), selectors.EVENT_READ, r)

        def take(r: int, msgs: list[dict] | None) -> None:
            if msgs is None:
                got[r] = ("died", None)
            for msg in msgs or ():
                if "died" in msg:
                    got[r] = ("died", None)
                elif "error" in msg:
                    got[r] = ("error", msg)
                elif want in msg:
                    got[r] = msg[want] if want == "ready" else ("ok", msg[want], msg.get("events"))
                if r in got:
                    break
            if r in got:
                pending.discard(r)
                sel.unregister(self._sock(r))

        try:
            # lines read with an earlier message: a rank can say hello and be ready in one read
            # (the select below would wait for more, which never comes, until the deadline)
            for r in sorted(pending):
                if b"\n" in self.buffers[r]:
                    try:
                        take(r, _whole_lines(self.buffers[r]))
                    except ValueError:
                        take(r, None)
            while pending and time.monotonic() < deadline:
                if any(v[0] != "ok" for v in got.values() if isinstance(v, tuple)):
                    break          # one rank failed: the scenario has failed
                events = sel.select(max(0.0, deadline - time.monotonic()))
                if not events:
                    break
                for key, _ in events:
                    r = key.data
                    try:
                        msgs = _lines(self.socks[r], self.buffers[r])
                    except (ValueError, OSError):
                        msgs = None
                    take(r, msgs)
        finally:
            sel.close()
        return got

    def run(self, call: Call, seconds: float, trace: bool = False) -> tuple[Outcome, str]:
        """Run one scenario on every rank. Returns (outcome, state) with state
        'ok', 'clean-error' (group still usable), 'error', 'hung' or 'died'.
        With `trace`, a successful outcome's `trace` is each rank's timed events
        as its trusted process recorded them (None if a rank sent none)."""
        request = (json.dumps({"run": {"scenario": call.function, "module": call.module,
                                       "args": call.args, "trace": trace}}) + "\n").encode()
        try:
            for r in range(self.world_size):
                self._sock(r).sendall(request)
        except OSError:
            return Outcome(error="a gloo rank ended its process before the scenario started"), "died"
        got = self._collect(time.monotonic() + seconds, set(range(self.world_size)), "result")
        failed = {r: v for r, v in got.items() if v[0] != "ok"}
        if not failed and len(got) == self.world_size:
            events = [got[r][2] for r in range(self.world_size)]
            return Outcome(value=[got[r][1] for r in range(self.world_size)],
                           trace=events if trace and all(isinstance(e, list) for e in events) else None), "ok"
        if not failed:
            where, _ = read_status(self.status, self.world_size)
            return Outcome(error=unfinished(self.world_size, got, where, seconds)), "hung"
        # let the other ranks report too: one failure often explains another
        more = self._collect(time.monotonic() + self.server.gloo.grace_seconds,
                             set(range(self.world_size)) - set(got), "result")
        got.update(more)
        failed = {r: v for r, v in got.items() if v[0] != "ok"}
        where, last = read_status(self.status, self.world_size)
        state, text = failure(self.world_size, failed, where, last, {r for r in got if r not in failed})
        return Outcome(error=text), state

    def kill(self) -> None:
        """The trusted ranks die; their student processes die with them
        (parent-death signal, then their PID namespaces) and with the cgroup."""
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.pids = []
        for s in self.socks:
            if s is not None:
                s.close()
        self.socks = [None] * self.world_size
        shutil.rmtree(self.dir, ignore_errors=True)


_LIVE: set["ForkServer"] = set()


@atexit.register
def _close_all() -> None:
    for server in list(_LIVE):
        server.close()
