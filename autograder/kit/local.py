"""Scenarios on gloo ranks on one machine, without walls: the starter kit's
local checks and the bucket benchmark.

The grader's harness (`sandbox.gloo.group`) splits each rank into a trusted
process and a walled-in student process, and forks them from a Linux-only
fork server. A student testing their own code on their own laptop needs
none of that, so this launcher keeps only what the checks depend on: the
same scenarios (`scenarios`), the same tracing of
torch.distributed (`tracing`), the same words for a hang or a crash
(`verdict`). Each rank is one fresh Python process (a subprocess, not a
fork: forking after torch has started its threads can hang, and a fresh
interpreter works the same on Linux and macOS, from pytest, a script or a
notebook) that runs all three halves of a scenario in turn:
`prepare`, `student` (the student's code calling the real, traced
collectives), `report`. The starter kit ships this file.

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

from .verdict import failure, unfinished
from .student_values import describe_exception, plain

START_SECONDS = 120.0          # spawning a rank imports torch: seconds, more on a cold laptop
MAX_ERROR_CHARS = 2000
_LIVE: set["LocalGroup"] = set()


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
        self._conns, self._procs = [], []
        _LIVE.add(self)
        try:
            for rank in range(world_size):
                ours, theirs = socket.socketpair()
                code = (f"import sys; sys.path[:0] = {sys.path!r}; "
                        f"from {__name__} import rank_main; rank_main()")
                self._procs.append(subprocess.Popen(
                    [sys.executable, "-c", code, json.dumps(spec), str(rank), str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
                    env=dict(os.environ, OMP_NUM_THREADS="1", TORCH_DISTRIBUTED_DEBUG=debug)))
                theirs.close()
                self._conns.append(Connection(ours.detach()))
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
            except (ProcessLookupError, PermissionError):
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


# ---- inside a rank -------------------------------------------------------------------


def _exit_with_parent(parent: int) -> None:
    """A rank outlives no launcher: pytest killed, the notebook's kernel restarted."""
    def watch():
        while os.getppid() == parent:
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
    """One tiny backward from a given gradient, while the rank starts: the first such backward in a
    process imports sympy (torch's `_make_grads`; about 0.4 s of CPU idle, seconds on a loaded laptop).
    In a pipeline every stage but the last pays it at its first backward, one after another down the
    stages, while stage 0 waits in a recv: on 4 stages that alone outlasted the collective timeout
    under load. Paid here, it overlaps the kit's other tests (the grader's fork server does the same,
    `sandbox.gloo.ranks.main`)."""
    x = torch.ones(2, 2, requires_grad=True)
    (x * 2).backward(torch.ones(2, 2))


def rank_main() -> None:
    """A rank's process: `python -c ... SPEC RANK FD` (LocalGroup starts it)."""
    spec, rank, conn = json.loads(sys.argv[1]), int(sys.argv[2]), Connection(int(sys.argv[3]))
    _exit_with_parent(spec["parent"])
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
