"""The gloo ranks' side: a fork server and the rank loop. Besides
autograder/sandbox_worker.py, the only place student code is imported.

The parent starts `python -I -m autograder.gloo.worker` in its own session.
The fork server imports torch and the scenarios, runs no torch op (forking
after torch has started its thread pools can hang a child), then forks the
ranks of each worker group on request, in milliseconds, sharing torch's
pages. Protocol, all JSON lines:

- stdin (parent -> server): first {"result_fd": fd, "modules": [extra
  scenario modules]}, then
  {"spawn": {"world_size", "root", "socket", "store", "collective_seconds",
  "memory_bytes"}} per group.
- result fd (server -> parent): {"ready": true}, then {"spawned": [pids]}
  per group (the first pid is the group's process-group id).
- each rank connects to the group's Unix socket and sends {"hello": rank},
  then {"ready": true} once the process group is up, and per scenario
  {"at": label or null} while it blocks in a collective and finally
  {"result": value} or {"error": message, "collectives": n}. The parent
  sends {"run": {"scenario", "module", "args"}}.

Ranks die with the fork server (PR_SET_PDEATHSIG), which dies with the
grader; student output goes to the server's stdout, which the parent caps.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import signal
import socket
import sys
import threading
from datetime import timedelta

from autograder.sandbox_worker import _BlockAnswerKey, _describe, _import, _load_package, plain

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _forget_grader_modules() -> None:
    """Student code shares the rank: make the answer key and the grader
    unimportable (the scenarios keep their own references)."""
    for name in list(sys.modules):
        if name.split(".")[0] in ("reference", "solutions", "autograder"):
            del sys.modules[name]
    sys.meta_path.insert(0, _BlockAnswerKey())


class _Channel:
    """JSON lines over the rank's socket to the parent; sends may come from hook threads."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")
        self.lock = threading.Lock()

    def send(self, **msg) -> None:
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            self.sock.sendall(data)

    def receive(self) -> dict | None:
        line = self.reader.readline()
        return json.loads(line) if line else None


def _rank_main(spec: dict, rank: int) -> None:
    import torch
    import torch.distributed as dist

    from autograder.gloo.scenarios import SCENARIOS, Context
    from autograder.gloo.tracing import Tracer, explain

    if spec.get("memory_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (spec["memory_bytes"], spec["memory_bytes"]))
    channel = _Channel(spec["socket"])
    channel.send(hello=rank, pid=os.getpid())
    channel.send(at="torch.set_num_threads")
    torch.set_num_threads(1)
    channel.send(at="the gloo rendezvous (init_process_group)")
    store = dist.FileStore(spec["store"], spec["world_size"])
    dist.init_process_group("gloo", store=store, rank=rank, world_size=spec["world_size"],
                            timeout=timedelta(seconds=spec["collective_seconds"]))
    channel.send(at=None)
    tracer = Tracer(status=lambda label: channel.send(at=label))
    tracer.install()
    _forget_grader_modules()
    _load_package(spec["root"])
    channel.send(ready=True)
    while (msg := channel.receive()) is not None:
        run = msg["run"]
        tracer.reset()
        ctx = Context(rank, spec["world_size"], run["module"], tracer, _load_student)
        try:
            value = plain(SCENARIOS[run["scenario"]](ctx, **run["args"]))
        except BaseException as exc:  # noqa: BLE001 - any failure of student code is a result
            where = f" [{tracer.where()}]" if tracer.seq else ""
            channel.send(error=(explain(exc) or _describe(exc)) + where, collectives=tracer.seq)
            continue
        channel.send(result=value)


def _load_student(module: str):
    try:
        return _import(module)
    except FileNotFoundError:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise ImportError(f"assignments/{module}.py failed to import: {_describe(exc)}") from None


def _fork_rank(spec: dict, rank: int, leader: int) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setpgid(0, leader)
            _die_with_parent()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(spec["result_fd"])
            _rank_main(spec, rank)
        except BaseException:  # noqa: BLE001 - the parent sees the closed socket
            code = 1
        finally:
            os._exit(code)      # never run the server's code after a rank returns
    try:
        os.setpgid(pid, leader or pid)
    except OSError:               # the child did it first, or already exited
        pass
    return pid


def serve() -> None:
    first = json.loads(sys.stdin.readline())
    results = os.fdopen(first["result_fd"], "w", buffering=1)
    _die_with_parent()
    import torch  # noqa: F401 - loaded once here, shared by every forked rank
    import torch.distributed  # noqa: F401

    from autograder.gloo.scenarios import load_all
    load_all()
    for extra in first.get("modules", ()):     # scenarios outside grading (the benchmark)
        importlib.import_module(extra)
    if first.get("jail"):                      # everything trusted is loaded: close the doors
        from autograder import jail
        jail.enter(jail.answer_key_dirs(), jail.interpreter_paths())
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # the kernel reaps finished ranks
    results.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        spec = json.loads(line)["spawn"]
        spec["result_fd"] = first["result_fd"]
        pids: list[int] = []
        for rank in range(spec["world_size"]):
            pids.append(_fork_rank(spec, rank, pids[0] if pids else 0))
        results.write(json.dumps({"spawned": pids}) + "\n")
    os._exit(0)


if __name__ == "__main__":
    serve()
