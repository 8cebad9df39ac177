"""Scenarios on gloo ranks on one machine, without walls: the starter kit's
local checks and the bucket benchmark.

The grader's harness (`sandbox.gloo.group`) splits each rank into a trusted
process and a walled-in student process, and forks them from a Linux-only
fork server. A student testing their own code on their own laptop needs
none of that, so this launcher keeps only what the checks depend on: the
same scenarios (`scenarios`), the same tracing of
torch.distributed (`tracing`), the same words for a hang or a crash
(`verdict`). Each rank is a Python process of its own that runs all three
halves of a scenario in turn: `prepare`, `student` (the student's code
calling the real, traced collectives), `report`. On Linux it is forked from
the launcher's fork server (`_ForkServer`), a process that imported torch
once and has run nothing (no torch thread exists to hang a fork), so a rank
starts in a fraction of a second instead of importing torch itself (2-3
CPU-seconds a rank, six ranks in a kit's run). multiprocessing's own
"forkserver" would do it too, but it runs the launcher's `__main__` again in
every child, which a student's script without a main guard does not survive.
Elsewhere (macOS, where forking a process that loaded torch's frameworks is
not safe), with SHARDLAB_FRESH_RANKS=1, or when the server cannot serve, a
rank is a fresh interpreter. Either works from pytest, a script or a
notebook. The starter kit ships this file.

Failing fast, leaving nothing behind:
- every collective has gloo's own timeout (`collective_seconds`), and torch
  checks that the ranks call the same collectives (TORCH_DISTRIBUTED_DEBUG);
- a scenario has a deadline on all ranks; past it the group is killed and
  the error names where each unfinished rank was blocked;
- ranks run in their own session (Ctrl-C goes to the launcher, which kills
  them, and whatever they started, in `LocalGroup.close()`, also at exit),
  and each rank exits on its own within half a second of its parent's death.

    with LocalGroup(world_size=2, root=".") as group:
        per_rank = group.run("ddp_train", "buckets", {"model": ..., "seed": 7, ...})

`run` returns one value per rank (the scenario's report) or raises
`ScenarioFailed` with the one-line reason; `group.events` then holds each
rank's timed trace (collectives, gradients, phases, marks) of that run.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import cast

from .deferred_shapes import install as install_deferred_shapes
from .verdict import failure, unfinished
from .student_values import describe_exception, plain

START_SECONDS = 120.0          # spawning a rank imports torch: seconds, more on a cold laptop
MAX_ERROR_CHARS = 2000
FRESH_RANKS_ENV = "SHARDLAB_FRESH_RANKS"     # set (to anything): a fresh interpreter per rank on Linux too
# what the fork server imports before it forks a rank (a backward from a given gradient needs no more:
# `_first_backward_from_a_gradient`)
PRELOAD = ("torch", "torch.distributed")
_LIVE: set["LocalGroup"] = set()


def _python_calling(function: str) -> list[str]:
    """The command line of a fresh interpreter that runs this module's `function()`, on this process's path."""
    return [sys.executable, "-c", f"import sys; sys.path[:0] = {sys.path!r}; "
                                  f"from {__name__} import {function}; {function}()"]


class _ForkServer:
    """A process of the launcher's that imported PRELOAD once and forks a rank on request: the
    request (the rank's spec and number) and the rank's end of its connection go over a socket
    (SOCK_SEQPACKET, the connection as SCM_RIGHTS); the reply is the rank's pid. Its ranks lead
    sessions of their own, and the server reaps them (SIGCHLD ignored). One per launcher process,
    started with its first rank (`shared`); it exits with the launcher."""

    _shared: "_ForkServer | None" = None
    _lock = threading.Lock()

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen([*_python_calling("fork_server_main"), str(os.getpid()), str(theirs.fileno())],
                                        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                        start_new_session=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        theirs.close()
        ours.settimeout(START_SECONDS)          # its imports come first: a server that never answers is gone
        self.socket = ours

    @classmethod
    def shared(cls) -> "_ForkServer | None":
        """The launcher's server (started now if need be); None off Linux or with FRESH_RANKS_ENV."""
        if sys.platform != "linux" or os.environ.get(FRESH_RANKS_ENV):
            return None
        with cls._lock:
            if cls._shared is None or cls._shared.process.poll() is not None:
                cls._shared = cls()
            return cls._shared

    def fork(self, spec: dict, rank: int, theirs: socket.socket) -> "_ForkedRank":
        """A rank forked with `theirs` as its connection; OSError when the server is gone or never answers."""
        with self._lock:
            try:
                socket.send_fds(self.socket, [json.dumps({"spec": spec, "rank": rank}).encode()],
                                [theirs.fileno()])
                reply = self.socket.recv(64)
                if not reply:
                    raise OSError("the rank fork server ended")
            except OSError:
                self.close()            # a late reply must not answer the next request: `shared` starts anew
                raise
        return _ForkedRank(int(reply))

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.socket.close()


class _ForkedRank:
    """A rank forked by the fork server, as LocalGroup handles a rank's process: its pid (the
    leader of a session of its own) and `wait()` (the server reaps it; this waits until it is gone)."""

    def __init__(self, pid: int):
        self.pid = pid

    def wait(self) -> None:
        deadline = time.monotonic() + 10
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.005)


class ScenarioFailed(Exception):
    """A scenario did not give a value on every rank; str() says why, in one line."""

    def __init__(self, message: str, state: str):
        super().__init__(message)
        self.state = state          # as in `verdict`: "error", "clean-error", "hung", "died"


class LocalGroup:
    """`world_size` spawned gloo ranks that import `root`/assignments/ and run scenarios on request."""

    def __init__(self, world_size: int, root: str = ".", collective_seconds: float = 5.0,
                 modules: tuple[str, ...] = (), debug: str = "DETAIL", wait: bool = True):
        """Spawns the ranks and, with `wait`, waits until every one has started (`ready`); without,
        the first `run` waits: the ranks import torch meanwhile, while the caller does other work."""
        self.world_size = world_size
        self._ready = False
        self.events: list[list[dict]] = [[] for _ in range(world_size)]
        self._dir = tempfile.mkdtemp(prefix="shardlab-ranks-")
        spec = dict(world_size=world_size, root=os.path.abspath(root), store=os.path.join(self._dir, "store"),
                    collective_seconds=collective_seconds, modules=list(modules), debug=debug,
                    parent=os.getpid())
        self._conns: list[Connection] = []
        self._procs: list = []
        _LIVE.add(self)
        server = _ForkServer.shared()
        try:
            for rank in range(world_size):
                ours, theirs = socket.socketpair()
                self._conns.append(Connection(ours.detach()))
                if server is not None:
                    try:
                        self._procs.append(server.fork(spec, rank, theirs))
                        theirs.close()
                        continue
                    except OSError:             # the server is gone: this rank and the rest start fresh
                        server = None
                self._procs.append(subprocess.Popen(
                    [*_python_calling("rank_main"), json.dumps(spec), str(rank), str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
                    env=dict(os.environ, OMP_NUM_THREADS="1", TORCH_DISTRIBUTED_DEBUG=debug)))
                theirs.close()
        except BaseException:
            self.close()
            raise
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until every rank has imported torch and joined the gloo group (START_SECONDS at
        most); ScenarioFailed naming the first rank that did not start, the group then closed."""
        if self._ready:
            return
        try:
            got, where, _ = self._collect(time.monotonic() + START_SECONDS, "ready")
            for rank in range(self.world_size):
                kind, payload = got.get(rank, ("", {"error": "no answer"}))
                if kind != "ok":
                    stuck = f" (stuck in {where[rank]})" if where[rank] else ""
                    raise ScenarioFailed(f"rank {rank} did not start{stuck}: "
                                         f"{(payload or {}).get('error', 'its process ended')}", "died")
        except BaseException:
            self.close()
            raise
        self._ready = True

    def __enter__(self) -> "LocalGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, scenario: str, module: str, args: dict, seconds: float = 60.0) -> list:
        """The scenario's value on every rank, or ScenarioFailed. After a
        failure other than "clean-error" the group is closed: make a new one."""
        if not self._procs:
            raise ScenarioFailed("the group was closed after an earlier failure", "died")
        self.ready()
        request = {"scenario": scenario, "module": module, "args": {"world_size": self.world_size, **args}}
        try:
            for conn in self._conns:
                conn.send(request)
        except OSError:
            self.close()
            raise ScenarioFailed("a gloo rank ended its process before the scenario started", "died") from None
        got, where, last = self._collect(time.monotonic() + seconds, "result")
        self.events = [got[r][1]["events"] if got.get(r, ("",))[0] == "ok" else [] for r in range(self.world_size)]
        failed = {r: v for r, v in got.items() if v[0] != "ok"}
        if not failed and len(got) == self.world_size:
            return [got[r][1]["value"] for r in range(self.world_size)]
        if not failed:
            self.close()
            raise ScenarioFailed(unfinished(self.world_size, got, where, seconds), "hung")
        more, _, _ = self._collect(time.monotonic() + 1.0, "result", pending=set(range(self.world_size)) - set(got),
                                   where=where, last=last)
        got.update(more)
        state, text = failure(self.world_size, {r: v for r, v in got.items() if v[0] != "ok"}, where, last,
                              {r for r, v in got.items() if v[0] == "ok"})
        if state != "clean-error":
            self.close()
        raise ScenarioFailed(text, state)

    def _collect(self, deadline: float, want: str, pending: set[int] | None = None,
                 where: list | None = None, last: list | None = None):
        """Each pending rank's ending ("ok", payload) / ("error", {...}) / ("died", None)
        until the deadline; `where`/`last`: the collective each rank is in / last entered."""
        pending = set(range(self.world_size)) if pending is None else pending
        where = where or [None] * self.world_size
        last = last or [None] * self.world_size
        got: dict[int, tuple] = {}
        by_conn = {self._conns[r]: r for r in pending}
        while by_conn and time.monotonic() < deadline:
            ready = wait(list(by_conn), timeout=max(0.0, deadline - time.monotonic()))
            for conn in cast("list[Connection]", ready):          # those of the connections given that are ready
                r = by_conn[conn]
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    kind, payload = "died", None
                if kind == "at":
                    where[r] = payload
                    last[r] = payload or last[r]
                    continue
                got[r] = ("ok", payload) if kind == want else (kind, payload)
                del by_conn[conn]
            if any(v[0] != "ok" for v in got.values()):
                break                   # one rank failed: the scenario has failed
        return got, where, last

    def close(self) -> None:
        """Kill every rank (they hold no state worth keeping) and remove the store."""
        for proc in self._procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)      # the rank and anything it started
            except ProcessLookupError:                   # a forked rank killed before its setsid()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signal.SIGKILL)
            except PermissionError:
                pass
        for proc in self._procs:
            proc.wait()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        shutil.rmtree(self._dir, ignore_errors=True)
        _LIVE.discard(self)


@atexit.register
def _close_all() -> None:
    for group in list(_LIVE):
        group.close()
    if _ForkServer._shared is not None:
        _ForkServer._shared.close()


# ---- inside a rank -------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _exit_with_parent(parent: int, forked: bool = False) -> None:
    """A rank outlives no launcher: pytest killed, the notebook's kernel restarted. A forked rank's
    parent is the fork server, not the launcher: it watches the launcher's pid itself."""
    def watch():
        while (_alive(parent) if forked else os.getppid() == parent):
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="parent watch").start()


class _Marks:
    """The student half's `ctx.mark`/`ctx.phase` land directly in the rank's record."""

    def __init__(self, rank_ctx, record_mark):
        self._ctx, self._record = rank_ctx, record_mark

    def mark(self, kind: str, **fields) -> None:
        self._record(self._ctx, {"mark": kind, **fields})


def _first_backward_from_a_gradient(torch) -> None:
    """One tiny backward from a given gradient, while the rank starts. torch's first such backward in a
    process imports sympy for its size check (`_make_grads`; about 0.5 s of CPU idle, seconds on a
    loaded laptop): in a pipeline every stage but the last paid it at its first backward, one after
    another down the stages, while stage 0 waited in a recv, and on 4 stages that alone outlasted the
    collective timeout under load. `deferred_shapes` answers that check without sympy (the grader's
    fork server does the same, `sandbox.gloo.ranks.main`); what is left of the first backward's set-up
    is paid here, before the rank reports ready."""
    install_deferred_shapes()
    x = torch.ones(2, 2, requires_grad=True)
    (x * 2).backward(torch.ones(2, 2))


def rank_main() -> None:
    """A rank's process: `python -c ... SPEC RANK FD` (LocalGroup starts it)."""
    spec, rank, conn = json.loads(sys.argv[1]), int(sys.argv[2]), Connection(int(sys.argv[3]))
    _exit_with_parent(spec["parent"])
    _serve(spec, rank, conn)


def fork_server_main() -> None:
    """The fork server's process: `python -c ... LAUNCHER_PID FD` (`_ForkServer`)."""
    launcher, server = int(sys.argv[1]), socket.socket(fileno=int(sys.argv[2]))
    _exit_with_parent(launcher)
    for name in PRELOAD:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)    # its ranks are reaped as they end
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(server, 1 << 20, 1)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            try:
                server.close()
                _forked_rank(request["spec"], request["rank"], Connection(fds[0]))
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        server.send(str(pid).encode())


def _forked_rank(spec: dict, rank: int, conn: Connection) -> None:
    """A rank forked by the fork server: what a fresh rank's command line and environment give it,
    then the same loop."""
    os.setsid()                                       # its own session: close() kills it and its children
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = spec["debug"]
    import torch.distributed as dist
    dist.set_debug_level_from_env()                   # read at import, in the server, before it was set
    _exit_with_parent(spec["parent"], forked=True)
    _serve(spec, rank, conn)


def _serve(spec: dict, rank: int, conn: Connection) -> None:
    """Join the group, then run the scenarios the launcher sends until it closes the connection."""
    lock = threading.Lock()

    def send(kind: str, payload=None) -> None:
        with lock:
            conn.send((kind, payload))

    sys.path.insert(0, spec["root"])                  # assignments/ is imported from the kit's folder
    try:
        import warnings

        import torch
        import torch.distributed as dist

        from .scenarios import (RankContext, StudentContext, load_all,
                                                                      record_mark)
        from .tracing import Tracer, explain
        warnings.filterwarnings("ignore")             # torch's deprecation notes
        torch.set_num_threads(1)
        scenarios = load_all()
        for extra in spec["modules"]:
            importlib.import_module(extra)
        send("at", "the gloo rendezvous (init_process_group)")
        dist.init_process_group("gloo", store=dist.FileStore(spec["store"], spec["world_size"]), rank=rank,
                                world_size=spec["world_size"],
                                timeout=timedelta(seconds=spec["collective_seconds"]))
        send("at", None)
        tracer = Tracer(status=lambda label: send("at", label), hold_results=True)
        tracer.install()
        _first_backward_from_a_gradient(torch)
    except BaseException as exc:  # noqa: BLE001 - the launcher reports it
        send("error", {"error": f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS], "collectives": 0})
        return
    send("ready", None)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        scenario = scenarios[request["scenario"]]
        tracer.reset()
        ctx = RankContext(rank, spec["world_size"], tracer)
        student = StudentContext(rank, spec["world_size"], request["module"], _Marks(ctx, record_mark),
                                 lambda module: importlib.import_module(f"assignments.{module}"), ctx.groups)
        try:
            student_args, tensors = scenario.prepare(ctx, **request["args"])
            claims = plain(scenario.student(student, tensors, **student_args))
            value = scenario.report(ctx, claims, **request["args"])
        except BaseException as exc:  # noqa: BLE001 - any failure is the run's result
            text = explain(exc) or describe_exception(exc)
            where = f" [{tracer.where()}]" if tracer.seq else ""
            send("error", {"error": text[:MAX_ERROR_CHARS] + where, "collectives": tracer.seq})
            continue
        send("result", {"value": value, "events": tracer.events + ctx.marks})
