"""Run student functions in a separate, walled process; get plain data back.

The grader never imports student code. `run_calls` stages the submission
(`staging`), starts the worker (`sandbox.worker`,
forked from the zygote that has imported torch: `sandbox.zygote`)
in its own session and cgroup, sends it the calls, and watches a private
result pipe with absolute deadlines. The worker walls itself in
(`jail.confine`: namespaces, a private allow-listed root, no privileges)
before it imports any student code. A call that kills the process fails
alone: the worker is killed (and with it its namespaces) and a fresh one
carries on with the remaining calls. A call that hangs costs its case group
(`Call.group`) only: the rest of that group is not run (each call would
only cost the deadline again), every other group's calls are. Output is
drained and capped.
"""
from __future__ import annotations

import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from shardlab.autograder.sandbox import jail, zygote
from shardlab.autograder.sandbox.leftovers import private_folder
from shardlab.autograder.sandbox.zygote import worker_env
from shardlab.autograder.core.parts import Call
from shardlab.autograder.core.phases import phase
from shardlab.autograder.kit.comparison import CALL_SECONDS, did_not_finish

OUTPUT_CAP_BYTES = 64 * 1024


@dataclass(frozen=True)
class Limits:
    call_seconds: float = CALL_SECONDS  # one student function call (they take microseconds); the kit's too
    import_seconds: float = 60.0    # importing a student module (may import torch)
    memory_bytes: int = 4 * 2**30   # address-space limit of each process that runs student code
    sandbox_memory_bytes: int = 3 * 2**30   # memory of a whole sandbox (its cgroup), every process in it
    # the grading's one budget ([grading] budget_seconds): the time.monotonic() by which all of its student
    # code must be done, every probe's calls and runs together; None: no budget (each call's own deadlines)
    deadline: float | None = None

    def left(self) -> float:
        """Seconds of the grading's budget left (infinite without one)."""
        return math.inf if self.deadline is None else self.deadline - time.monotonic()


# the error of a call the grading's budget left no time for (`untrusted.failure_kind`: did not finish)
OUT_OF_BUDGET = "did not finish: the grading's time budget ran out before it could run"


@dataclass
class Outcome:
    """One call's result: value on success, else error (a one-line message); a gloo
    run's `trace` is each rank's timed events (`kit.tracing`)."""

    value: object = None
    error: str | None = None
    trace: list | None = None


@dataclass
class SandboxRun:
    outcomes: list[Outcome]
    output: str = ""                 # the student's stdout+stderr, capped
    output_bytes: int = 0            # total the student printed
    restarts: int = 0
    notes: list[str] = field(default_factory=list)


class CappedReader(threading.Thread):
    """Drains the student's output so it can never block; keeps the first cap bytes."""

    def __init__(self, stream, sink: bytearray, counter: list[int]):
        super().__init__(daemon=True)
        self.stream, self.sink, self.counter = stream, sink, counter

    def run(self):
        while chunk := self.stream.read1(65536):
            self.counter[0] += len(chunk)
            room = OUTPUT_CAP_BYTES - len(self.sink)
            if room > 0:
                self.sink.extend(chunk[:room])


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class Sandbox:
    """Where one grading's student processes live: a private staging folder
    (the submission copied without following links; its parent is 0700 so no
    other sandbox can reach it) and, where the machine has them, a cgroup
    that bounds their memory and processes and kills them all at the end."""

    def __init__(self, root: str, memory_bytes: int, pids: int = 512):
        self.walls = jail.walls()
        self.private = private_folder("stage")          # 0700, named for this grader (`leftovers`)
        self.root = str(jail.stage(root, Path(self.private) / "staged"))
        self.cgroup = jail.Cgroup.create(memory_bytes, pids)

    def admit(self, pid: int) -> None:
        """Put a trusted process, before it starts student code, in the cgroup."""
        if self.cgroup:
            self.cgroup.add(pid)

    def close(self) -> None:
        if self.cgroup:
            self.cgroup.kill()
            self.cgroup.remove()
            self.cgroup = None
        shutil.rmtree(self.private, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_calls(root: str, calls: list[Call], limits: Limits = Limits()) -> SandboxRun:
    """Evaluate every call against the submission at `root` (holding assignments/)."""
    with Sandbox(root, limits.sandbox_memory_bytes) as box:
        return _run_calls(box, calls, limits)


def prepare(root: str, limits: Limits = Limits()) -> None:
    """Start the zygote now: it imports torch while the grader computes expectations."""
    try:
        zygote.shared()
    except OSError:             # the batch's zygote is gone: the first start falls back
        zygote.forget_shared()


# the probe's optional start-up (`probes.StartingProbe`); ignore: mypy does not model attributes set on a function
run_calls.prepare = prepare         # type: ignore[attr-defined]


def _run_calls(box: Sandbox, calls: list[Call], limits: Limits) -> SandboxRun:
    outcomes: list[Outcome | None] = [None] * len(calls)
    output, printed = bytearray(), [0]
    run = SandboxRun(outcomes=[])
    while (pending := [i for i, o in enumerate(outcomes) if o is None]):
        if limits.left() <= 0:          # no worker is started past the grading's budget
            for i in pending:
                outcomes[i] = Outcome(error=OUT_OF_BUDGET)
            break
        _one_worker(box, calls, pending, outcomes, limits, output, printed)
        run.restarts += 1
    run.restarts -= 1
    run.outcomes = outcomes  # type: ignore[assignment]
    run.output = output.decode("utf-8", "replace")
    run.output_bytes = printed[0]
    return run


def _one_worker(box, calls, pending, outcomes, limits, output, printed) -> None:
    read_fd, write_fd = os.pipe()
    request = {
        "root": box.root,
        "result_fd": write_fd,
        "namespaces": box.walls.namespaces,
        "memory_bytes": limits.memory_bytes,
        "calls": [dict(module=calls[i].module, function=calls[i].function,
                       args=list(calls[i].args.values())) for i in pending],
    }
    with phase("start the worker (the zygote's torch import, waited for)", lane="calls"):
        proc = zygote.start("worker", box.private, worker_env(), (write_fd,))
    os.close(write_fd)
    box.admit(proc.pid)              # before the request: no student code has run yet
    reader = CappedReader(proc.stdout, output, printed)
    reader.start()
    try:
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    _watch(proc, read_fd, calls, pending, outcomes, limits)
    reader.join(timeout=5)


MAX_LINE_BYTES = 1 << 20           # one result line; more is a corrupted channel


def _watch(proc, read_fd, calls, pending, outcomes, limits) -> None:
    """Follow the result stream; on a hang or a death, blame the current call.

    Deadlines are absolute and no message extends them: the whole worker has
    one budget (the imports' plus every call's), and each call or import its
    own from the moment it began. Messages must follow the protocol (each
    module imported once, calls started in order), else the channel is
    corrupted and the worker is killed."""
    sel = selectors.DefaultSelector()
    sel.register(read_fd, selectors.EVENT_READ)
    buffer = b""
    current, importing = None, None          # index into pending, module being imported
    started = time.monotonic()
    overall = min(started + limits.import_seconds + limits.call_seconds * len(pending),
                  started + limits.left())      # the worker's own budget, within the grading's
    deadline = min(overall, started + limits.import_seconds)
    imported: set[str] = set()
    expect_next = 0                          # the next call the worker may start or answer

    def corrupted():
        kill_group(proc)
        _blame(calls, pending, outcomes, current, importing, "corrupted the grader's result channel", limits)

    try:
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0 or not sel.select(timeout):
                kill_group(proc)
                _blame(calls, pending, outcomes, current, importing, "timed out", limits)
                return
            chunk = os.read(read_fd, 65536)
            if not chunk:
                try:
                    code = proc.wait(timeout=max(0.1, min(2.0, overall - time.monotonic())))
                except subprocess.TimeoutExpired:
                    kill_group(proc)
                    code = proc.returncode
                if any(outcomes[i] is None for i in pending):
                    why = f"ended the grading process (exit status {code})"
                    _blame(calls, pending, outcomes, current, importing, why, limits)
                return
            buffer += chunk
            if len(buffer) > MAX_LINE_BYTES and b"\n" not in buffer:
                return corrupted()
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                    if not isinstance(msg, dict):
                        raise ValueError
                    if "importing" in msg:
                        if msg["importing"] in imported or current is not None:
                            raise ValueError
                        imported.add(msg["importing"])
                    elif "start" in msg:
                        if msg["start"] != expect_next:
                            raise ValueError
                    elif "done" in msg:
                        if msg["done"] != expect_next:
                            raise ValueError
                        slot = pending[msg["done"]]
                    else:
                        raise ValueError
                except (ValueError, KeyError, IndexError, TypeError, RecursionError):   # a nesting too deep too
                    return corrupted()
                now = time.monotonic()
                if "importing" in msg:
                    importing, current = msg["importing"], None
                    deadline = min(overall, now + limits.import_seconds)
                elif "start" in msg:
                    importing, current = None, msg["start"]
                    deadline = min(overall, now + limits.call_seconds)
                elif "done" in msg:
                    outcomes[slot] = Outcome(msg.get("value"), msg.get("error"))
                    current, importing = None, None
                    expect_next += 1
                    deadline = min(overall, now + limits.call_seconds)
    finally:
        sel.close()
        os.close(read_fd)
        if proc.poll() is None:
            kill_group(proc)


def _blame(calls, pending, outcomes, current, importing, why, limits) -> None:
    """Fail the call (or module import) that was running, and its siblings that
    would only repeat it: after a hang, the rest of its case group's calls
    (`Call.group`; a call without a group is a group of its own), so that a
    slow edge case costs its group's share and every other group is still
    run; after a failed import, the whole module."""
    if importing is not None:
        msg = f"importing assignments/{importing}.py {why}"
        for i in pending:
            if outcomes[i] is None and calls[i].module == importing:
                outcomes[i] = Outcome(error=msg)
        return
    if current is None:  # died between calls: blame the next one
        current = next(k for k, i in enumerate(pending) if outcomes[i] is None)
    culprit = calls[pending[current]]
    hung = why == "timed out"
    if hung:
        why = (did_not_finish(limits.call_seconds) if limits.left() > 0
               else "did not finish: the grading's time budget ran out")
    outcomes[pending[current]] = Outcome(error=f"{culprit.show()} {why}")
    if hung and culprit.group is not None:
        for i in pending:
            if outcomes[i] is None and calls[i].group == culprit.group:
                outcomes[i] = Outcome(error="not run: an earlier call in the same case group did not finish")
