"""Run student functions in a separate, limited process; get plain data back.

The grader never imports student code. `run_calls` starts
`python -I -u -m autograder.sandbox_worker` in its own session with a memory
limit, sends it the calls, and watches a private result pipe with a
wall-clock budget per call. A call that hangs or kills the process fails
alone: the worker is killed (its whole process group) and a fresh one
carries on with the remaining calls. Output is drained and capped.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import jail
from autograder.parts import Call

OUTPUT_CAP_BYTES = 64 * 1024


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 5.0       # one student function call (they take microseconds)
    import_seconds: float = 60.0    # importing a student module (may import torch)
    memory_bytes: int = 4 * 2**30   # address-space limit of the worker


@dataclass
class Outcome:
    """One call's result: value on success, else error (a one-line message)."""

    value: object = None
    error: str | None = None


@dataclass
class SandboxRun:
    outcomes: list[Outcome]
    output: str = ""                 # the student's stdout+stderr, capped
    output_bytes: int = 0            # total the student printed
    restarts: int = 0
    notes: list[str] = field(default_factory=list)


class _CappedReader(threading.Thread):
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


def worker_env(**extra: str) -> dict[str, str]:
    """The whole environment of a process that runs student code: nothing of
    the grader's leaks in (tokens, paths), hashing and threads are fixed."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", **extra}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_calls(root: str, calls: list[Call], limits: Limits = Limits()) -> SandboxRun:
    """Evaluate every call against the submission at `root` (holding assignments/)."""
    if jail.launcher():
        with tempfile.TemporaryDirectory(prefix="shardlab-jail-") as tmp:
            return _run_calls(str(jail.stage(root, Path(tmp))), calls, limits)
    return _run_calls(root, calls, limits)


def _run_calls(root: str, calls: list[Call], limits: Limits) -> SandboxRun:
    outcomes: list[Outcome | None] = [None] * len(calls)
    output, printed = bytearray(), [0]
    run = SandboxRun(outcomes=[])
    while (pending := [i for i, o in enumerate(outcomes) if o is None]):
        _one_worker(root, calls, pending, outcomes, limits, output, printed)
        run.restarts += 1
    run.restarts -= 1
    run.outcomes = outcomes  # type: ignore[assignment]
    run.output = output.decode("utf-8", "replace")
    run.output_bytes = printed[0]
    return run


def _one_worker(root, calls, pending, outcomes, limits, output, printed) -> None:
    read_fd, write_fd = os.pipe()
    request = {
        "root": os.path.abspath(root),
        "result_fd": write_fd,
        "jail": bool(jail.launcher()),
        "memory_bytes": limits.memory_bytes,
        "calls": [dict(module=calls[i].module, function=calls[i].function,
                       args=list(calls[i].args.values())) for i in pending],
    }
    proc = subprocess.Popen(
        [*jail.launcher(), sys.executable, "-I", "-u", "-m", "autograder.sandbox_worker"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        pass_fds=(write_fd,), start_new_session=True, cwd=root,
        env=worker_env(),
    )
    os.close(write_fd)
    reader = _CappedReader(proc.stdout, output, printed)
    reader.start()
    try:
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    _watch(proc, read_fd, calls, pending, outcomes, limits)
    reader.join(timeout=5)


def _watch(proc, read_fd, calls, pending, outcomes, limits) -> None:
    """Follow the result stream; on a hang or a death, blame the current call."""
    sel = selectors.DefaultSelector()
    sel.register(read_fd, selectors.EVENT_READ)
    buffer = b""
    current, importing = None, None          # index into pending, module being imported
    deadline = time.monotonic() + limits.import_seconds
    try:
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0 or not sel.select(timeout):
                _kill_group(proc)
                _blame(calls, pending, outcomes, current, importing, "timed out", limits)
                return
            chunk = os.read(read_fd, 65536)
            if not chunk:
                code = proc.wait()
                if any(outcomes[i] is None for i in pending):
                    why = f"ended the grading process (exit status {code})"
                    _blame(calls, pending, outcomes, current, importing, why, limits)
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                    if "done" in msg:
                        slot = pending[msg["done"]]
                except (ValueError, KeyError, IndexError, TypeError):
                    _kill_group(proc)
                    _blame(calls, pending, outcomes, current, importing,
                           "corrupted the grader's result channel", limits)
                    return
                if "importing" in msg:
                    importing, current = msg["importing"], None
                    deadline = time.monotonic() + limits.import_seconds
                elif "start" in msg:
                    importing, current = None, msg["start"]
                    deadline = time.monotonic() + limits.call_seconds
                elif "done" in msg:
                    outcomes[slot] = Outcome(msg.get("value"), msg.get("error"))
                    current = None
                    deadline = time.monotonic() + limits.call_seconds
    finally:
        sel.close()
        os.close(read_fd)
        if proc.poll() is None:
            _kill_group(proc)


def _blame(calls, pending, outcomes, current, importing, why, limits) -> None:
    """Fail the call (or module import) that was running, and its siblings that
    would only repeat it: the rest of that function's calls after a hang, the
    whole module after a failed import."""
    if importing is not None:
        msg = f"importing assignments/{importing}.py {why}"
        for i in pending:
            if outcomes[i] is None and calls[i].module == importing:
                outcomes[i] = Outcome(error=msg)
        return
    if current is None:  # died between calls: blame the next one
        current = next(k for k, i in enumerate(pending) if outcomes[i] is None)
    culprit = calls[pending[current]]
    if why == "timed out":
        why = f"did not finish within {limits.call_seconds:g} s"
    outcomes[pending[current]] = Outcome(error=f"{culprit.show()} {why}")
    if why.startswith("did not finish"):
        for i in pending:
            if outcomes[i] is None and (calls[i].module, calls[i].function) == (culprit.module, culprit.function):
                outcomes[i] = Outcome(error=f"not run: an earlier call of {culprit.function} did not finish")
