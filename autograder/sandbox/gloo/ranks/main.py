"""The fork server, and the two processes of every rank it forks.

The grader starts the fork server (a fork of the zygote, `sandbox.zygote`,
or `python -I -m shardlab.autograder.sandbox.gloo.ranks.main`) in its own session
and cgroup. The fork server imports torch and the scenarios (`preload`), runs no torch
op (forking after torch has started its thread pools can hang a child), and
forks the ranks of each worker group on request, in milliseconds, sharing
torch's pages. Each rank is two processes:

    rank r (trusted: `ranks.trusted`)             -- gloo, the trace, the grader's socket
      └─ its student process (walled in: `jail`)  -- student code, no network

The student process is forked first, before gloo starts, and walls itself in
before it imports any student code; it talks only to its rank's trusted
process, over a socketpair. Protocol with the grader, all JSON lines:

- stdin (grader -> server): first {"result_fd": fd, "modules": [extra
  scenario modules], "files": [[module name, file] of a course's own
  scenarios]}, then {"spawn": {"world_size", "root", "namespaces",
  "socket", "store", "collective_seconds", "memory_bytes", "status", "board"}} per group
  ("status": the file on which each trusted rank keeps the collective it is in,
  `ranks.status`; "board": the file on which the trusted ranks check the collectives' fingerprints,
  `ranks.fingerprint`; none: no check).
- result fd (server -> grader): {"ready": true}, then {"spawned": [pids]}
  per group (the trusted processes' pids; the first is the group's process
  group id).
- each trusted rank connects to the group's Unix socket (in a folder only
  the grader can enter) and sends {"hello": rank}, then {"ready": true} once
  the process group is up, then per scenario (`ranks.trusted`); where it is
  blocked it keeps on its status slot, not in messages (`ranks.status`).

Trusted ranks die with the fork server (PR_SET_PDEATHSIG), which dies with
its parent (the zygote or the grader) and
ends when the grader closes its stdin; student processes die with their rank (`jail`) and
with the sandbox's cgroup. Student output goes to the server's stdout, which
the grader caps.
"""
from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import socket
import sys
import warnings
from datetime import timedelta

from shardlab.autograder.sandbox.gloo.ranks.channel import Channel, unpack_tensors
from shardlab.autograder.kit.student_values import describe_exception, plain
from shardlab.autograder.sandbox import unix_socket
from shardlab.autograder.sandbox.jail import die_with_parent
from shardlab.autograder.sandbox.worker import BlockAnswerKey, import_student_module, load_submission_package



class _GraderLine:
    """JSON lines to the grader over the group's socket (from one thread)."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix_socket.connect(self.sock, path)
        self.reader = self.sock.makefile("rb")

    def send(self, **msg) -> None:
        self.sock.sendall((json.dumps(msg) + "\n").encode())

    def receive(self) -> dict | None:
        line = self.reader.readline()
        return json.loads(line) if line else None


# ---- the student's process ----------------------------------------------------------------


def _student_main(spec: dict, rank: int, sock: socket.socket) -> None:
    """Walled in before any student code; then runs the student halves of scenarios."""
    import torch

    from shardlab.autograder.sandbox import jail
    from shardlab.autograder.sandbox.gloo.ranks.proxy import Proxy
    from shardlab.autograder.kit.scenarios import SCENARIOS, StudentContext

    jail.confine(spec["root"], keep=(1, 2, sock.fileno()), namespaces=spec["namespaces"])
    if spec.get("memory_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (spec["memory_bytes"], spec["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    torch.set_num_threads(1)
    proxy = Proxy(Channel(sock), rank, spec["world_size"])
    proxy.install()
    # Only harness code of the grader is in this process's memory (the scenarios,
    # kit.toy_models and kit.comm4d_mesh: models and a mesh forward,
    # no answers; `test_attacks_gloo` checks). Unlisting it keeps student
    # imports from reaching it by name.
    for name in list(sys.modules):
        if name.split(".")[0] == "shardlab":
            del sys.modules[name]
    sys.meta_path.insert(0, BlockAnswerKey())
    load_submission_package(jail.SUBMISSION if spec["namespaces"] else spec["root"])
    while (frame := proxy.next_run()) is not None:
        header, payload = frame
        run = header["run"]
        ctx = StudentContext(rank, spec["world_size"], run["module"], proxy, _load_student,
                             proxy.named_groups(run.get("groups", {})))
        try:
            tensors = unpack_tensors(run["tensors"], payload)
            value = plain(SCENARIOS[run["scenario"]].student(ctx, tensors, **run["args"]))
        except BaseException as exc:  # noqa: BLE001 - any failure of student code is a result
            proxy.channel.send({"error": describe_exception(exc)})
            continue
        proxy.channel.send({"result": value})


def _load_student(module: str):
    try:
        return import_student_module(module)
    except FileNotFoundError:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise ImportError(f"assignments/{module}.py failed to import: {describe_exception(exc)}") from None


# ---- the rank's trusted process --------------------------------------------------------------


def _rank_main(spec: dict, rank: int) -> None:
    ours, theirs = socket.socketpair()
    student = os.fork()
    if student == 0:
        code = 0
        try:
            ours.close()
            _student_main(spec, rank, theirs)
        except BaseException:  # noqa: BLE001 - the trusted side sees the closed socket
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    import torch
    import torch.distributed as dist

    from shardlab.autograder.sandbox.gloo.ranks.board import Board
    from shardlab.autograder.sandbox.gloo.ranks.fingerprint import FingerprintCheck
    from shardlab.autograder.sandbox.gloo.ranks.status import RankStatus
    from shardlab.autograder.sandbox.gloo.ranks.trusted import serve_run
    from shardlab.autograder.kit.tracing import Tracer

    warnings.filterwarnings("ignore")             # torch's deprecation notes are not the student's output
    grader = _GraderLine(spec["socket"])
    status = RankStatus(spec["status"], spec["world_size"], rank)     # where this rank is (`ranks.status`)
    grader.send(hello=rank, pid=os.getpid())
    status.enter("torch.set_num_threads")
    torch.set_num_threads(1)
    status.enter("the gloo rendezvous (init_process_group)")
    store = dist.FileStore(spec["store"], spec["world_size"])
    dist.init_process_group("gloo", store=store, rank=rank, world_size=spec["world_size"],
                            timeout=timedelta(seconds=spec["collective_seconds"]))
    check = None
    if spec.get("board"):          # the ranks check each other's collective fingerprints (`ranks.fingerprint`)
        check = FingerprintCheck(Board(spec["board"], spec["world_size"], rank), spec["collective_seconds"],
                                 spec["world_size"])
    status.enter(None)
    tracer = Tracer(status=status.enter, check=check)
    tracer.install()
    channel = Channel(ours)
    grader.send(ready=True)
    while (msg := grader.receive()) is not None:
        status.reset()
        serve_run(msg["run"], channel, grader.send, tracer, rank, spec["world_size"])


def _fork_rank(spec: dict, rank: int, leader: int) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setpgid(0, leader)
            die_with_parent()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(spec["result_fd"])
            _rank_main(spec, rank)
        except BaseException:  # noqa: BLE001 - the grader sees the closed socket
            code = 1
        finally:
            os._exit(code)      # never run the server's code after a rank returns
    try:
        os.setpgid(pid, leader or pid)
    except OSError:               # the child did it first, or already exited
        pass
    return pid


def preload() -> None:
    """Everything a rank needs, imported once before any fork (the zygote
    calls this too): torch, the student side
    (loaded before any wall goes up), the trusted side, the scenarios, and
    the jail's path lists and system-call filter library (found once, inherited
    by every rank)."""
    import torch  # noqa: F401 - loaded once here, shared by every forked rank
    import torch.distributed  # noqa: F401

    import shardlab.autograder.sandbox.gloo.ranks.fingerprint  # noqa: F401 - the trusted ranks' check
    import shardlab.autograder.sandbox.gloo.ranks.proxy  # noqa: F401
    import shardlab.autograder.sandbox.gloo.ranks.status  # noqa: F401 - each trusted rank's slot
    import shardlab.autograder.sandbox.gloo.ranks.trusted  # noqa: F401
    from shardlab.autograder.kit import deferred_shapes
    from shardlab.autograder.sandbox import jail, syscall_filter
    deferred_shapes.install()      # before the first backward from a given gradient: torch's size check, no sympy
    jail.allowed_paths(), jail.grader_entries(), syscall_filter.available()
    from shardlab.autograder.kit.scenarios import load_all
    load_all()
    _first_calls()


def _first_calls() -> None:
    """One tiny forward, backward and update: torch sets up its operators and
    autograd on first use (about 0.1 s of CPU), and doing it here, before any
    fork, saves it in every rank and worker. The backward from a given gradient
    (a pipeline stage's) checks the gradient's size through
    `kit.deferred_shapes`, which `preload` installed first: torch's own
    module would import sympy, 0.5 s more on every grading's critical path. CPU
    only, one thread: autograd starts no threads for the CPU, so forking
    afterwards stays safe."""
    import torch
    from torch import nn
    with torch.random.fork_rng(devices=[]):        # a child's random numbers are a fresh process's
        model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        loss = nn.functional.mse_loss(model(torch.randn(4, 8)), torch.randn(4, 8))
        loss.backward()
        out = model(torch.randn(4, 8))
        out.backward(torch.ones_like(out))   # a backward from a given gradient (a pipeline stage's)
        with torch.no_grad():
            for p in model.parameters():
                assert p.grad is not None           # every parameter is in the loss
                p.add_(p.grad, alpha=-0.1)
                torch.cat([p.flatten(), p.grad.flatten()]).chunk(2)


def _load_course_scenarios(files) -> None:
    """A course's own scenarios, [module name, file] each (`core.course_folders.scenario_files`): instructor
    code the grader loaded and checked already, imported here under the same names before any rank is
    forked, so every rank's trusted and student halves find them in SCENARIOS as they find the kit's."""
    import importlib.util
    for name, path in files:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def serve() -> None:
    first = json.loads(sys.stdin.readline())
    results = os.fdopen(first["result_fd"], "w", buffering=1)
    die_with_parent()
    preload()
    for extra in first.get("modules", ()):     # scenarios outside grading (the benchmark)
        importlib.import_module(extra)
    _load_course_scenarios(first.get("files", ()))
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
