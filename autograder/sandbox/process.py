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
drained and capped, one cap for all of a sandbox's workers.

Hidden calls last (`hidden_last`): the public calls run first, then, once
the grading's gate opens (every probe done with its public calls), the
hidden ones in fresh workers, so no worker that reports a public value has
seen a hidden input. Each of the two sets is run as follows.

One worker runs every call of the set until one hangs: the common case pays
for two jails. After a hang (a call's or an import's deadline passed), the calls
still to run are split by case group over up to `WORKERS_AFTER_A_HANG`
workers at once, each share then run as above (a fresh worker for what a
killed or dead one left). A submission that hangs in several groups (a
sleep, a busy loop) so waits out about one deadline per round of hangs
side by side, not one per hung group in a row. A group's calls stay
together, in order, in one worker, and outcomes are kept by call index,
so they are those of one worker running the calls one after another;
what a call can see of earlier calls in its process (module globals)
differs, as it already did after any replaced worker.

Memory: the workers of one submission share its sandbox's cgroup
(`Limits.sandbox_memory_bytes`), as every process a submission starts
always has. That bound is per submission, so side-by-side workers take no
more of the machine than one did. A worker is a fork of the zygote:
torch's pages stay the zygote's, and a worker adds only what it writes
(about 15 MiB before the student allocates anything, against 3 GiB).
Only after a hang do workers share the limit, and only a call that needs
most of it can then fail for a sibling's memory (the kernel's OOM killer
takes the cgroup's largest process, usually the hog itself) where alone
it might have fit: a submission that already hangs and hogs.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from shardlab.autograder.sandbox import jail, zygote
from shardlab.autograder.sandbox.hidden_last import Party, split
from shardlab.autograder.sandbox.leftovers import KILL_WAIT_SECONDS, kill_session, private_folder
from shardlab.autograder.sandbox.zygote import worker_env
from shardlab.autograder.core.parts import Call
from shardlab.autograder.core.phases import phase
from shardlab.autograder.kit.comparison import CALL_SECONDS, did_not_finish

OUTPUT_CAP_BYTES = 64 * 1024
# Workers at once after a hang (module docstring). Hung calls use no CPU (a sleep) or one core each (a busy loop)
# for one deadline; a submission's hung groups are mostly one function's, consecutive, which the round-robin split
# spreads one per worker. Six: the course's largest function has 6 case groups, so the 5 left after the first hang
# land one per worker and take one more deadline, not two (a busy loop's CPU is the same either way, only sooner);
# a jail costs ~15 ms and ~15 MiB of the submission's own cgroup, and the common case (no hang) has one worker.
WORKERS_AFTER_A_HANG = 6


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
    restarts: int = 0                # workers started after the first (each for calls a killed or dead one left)
    notes: list[str] = field(default_factory=list)


class CappedReader(threading.Thread):
    """Drains the student's output so it can never block; keeps the first cap bytes.
    Readers may share a sink and counter (a sandbox's workers side by side): one cap for them all."""

    # the count and the room check then extend must not interleave between readers of one sink (a lost count, a
    # sink past its cap); one lock for every reader is simpler than one per sink and costs nothing at this rate
    lock = threading.Lock()

    def __init__(self, stream, sink: bytearray, counter: list[int]):
        super().__init__(daemon=True)
        self.stream, self.sink, self.counter = stream, sink, counter

    def run(self):
        while chunk := self.stream.read1(65536):
            with self.lock:
                self.counter[0] += len(chunk)
                room = OUTPUT_CAP_BYTES - len(self.sink)
                if room > 0:
                    self.sink.extend(chunk[:room])


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a sandbox process started in its own session (`zygote.start`) and everything of that session,
    and return only once none of it is alive (`leftovers.kill_session`: a loaded machine delivers SIGKILL
    late, and a grading must not return while its processes live)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    survivors = kill_session(proc.pid)
    if survivors:
        raise SandboxError(f"processes {survivors} of a sandbox outlived SIGKILL for {KILL_WAIT_SECONDS:g} s")


class SandboxError(Exception):
    """A sandbox's processes could not be ended (the machine's, never the student's fault)."""


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


def run_calls(root: str, calls: list[Call], limits: Limits = Limits(), gate: Party | None = None) -> SandboxRun:
    """Evaluate every call against the submission at `root` (holding assignments/): the public calls first,
    then, once `gate` (the grading's) opens, the hidden ones in fresh workers (`hidden_last`)."""
    with Sandbox(root, limits.sandbox_memory_bytes) as box:
        return _run_calls(box, calls, limits, gate or Party.alone())


def prepare(root: str, limits: Limits = Limits()) -> None:
    """Start the zygote now: it imports torch while the grader computes expectations."""
    try:
        zygote.shared()
    except OSError:             # the batch's zygote is gone: the first start falls back
        zygote.forget_shared()


# the probe's optional start-up (`probes.StartingProbe`); ignore: mypy does not model attributes set on a function
run_calls.prepare = prepare         # type: ignore[attr-defined]


def _run_calls(box: Sandbox, calls: list[Call], limits: Limits, gate: Party) -> SandboxRun:
    outcomes: list[Outcome | None] = [None] * len(calls)
    output, printed = bytearray(), [0]
    public, hidden = split(calls)
    try:
        started = _run_some(box, calls, public, outcomes, limits, output, printed)
    finally:
        gate.public_done()
    if hidden and gate.wait(limits.deadline):
        started += _run_some(box, calls, hidden, outcomes, limits, output, printed)
    for i in hidden:                # the gate stayed shut: the budget ran out before every public call was done
        outcomes[i] = outcomes[i] or Outcome(error=OUT_OF_BUDGET)
    return SandboxRun(outcomes=outcomes, output=output.decode("utf-8", "replace"),  # type: ignore[arg-type]
                      output_bytes=printed[0], restarts=max(0, started - 1))


def _run_some(box: Sandbox, calls: list[Call], some: list[int], outcomes, limits, output, printed) -> int:
    """Run the calls `some` (indices into `calls`): one worker until a hang, then the rest split over up to
    WORKERS_AFTER_A_HANG workers (module docstring). Returns the workers started."""
    if not some:
        return 0
    started, hung = _carry_on(box, calls, some, outcomes, limits, output, printed, "calls", stop_at_a_hang=True)
    left = [i for i in some if outcomes[i] is None]
    if hung and left:
        shares = _shares(calls, left, WORKERS_AFTER_A_HANG)
        with phase(f"the calls left after a hang, {len(shares)} workers side by side", lane="calls"), \
                ThreadPoolExecutor(max_workers=len(shares)) as pool:
            # every share's thread ends (its worker killed and reaped) before this returns, even if one raised
            lanes = ["calls" if k == 0 else f"calls {k + 1}" for k in range(len(shares))]
            done = [pool.submit(_carry_on, box, calls, share, outcomes, limits, output, printed, lane)
                    for share, lane in zip(shares, lanes)]
            started += sum(future.result()[0] for future in done)
    return started


def _shares(calls: list[Call], pending: list[int], workers: int) -> list[list[int]]:
    """`pending` split into at most `workers` shares, whole case groups each
    (a call without a group is a group of its own), each share in call order.
    Groups are dealt round-robin in order of their first call: the groups
    that hang together are mostly one function's, consecutive, and so land
    in different workers."""
    groups: dict[object, list[int]] = {}
    for i in pending:
        groups.setdefault(i if calls[i].group is None else calls[i].group, []).append(i)
    shares: list[list[int]] = [[] for _ in range(min(workers, len(groups)))]
    for k, members in enumerate(groups.values()):
        shares[k % len(shares)].extend(members)
    return [sorted(share) for share in shares]


def _carry_on(box, calls, share, outcomes, limits, output, printed, lane, stop_at_a_hang=False) -> tuple[int, bool]:
    """Run `share`'s calls, a fresh worker for what a killed or dead one left,
    until each has an outcome (or, `stop_at_a_hang`, until a worker hangs).
    No worker is started past the grading's budget. Returns (workers started,
    whether it stopped at a hang)."""
    started = 0
    while (pending := [i for i in share if outcomes[i] is None]):
        if limits.left() <= 0:          # no worker is started past the grading's budget
            for i in pending:
                outcomes[i] = Outcome(error=OUT_OF_BUDGET)
            break
        ended = _one_worker(box, calls, pending, outcomes, limits, output, printed, lane)
        started += 1
        if stop_at_a_hang and ended == TIMED_OUT:
            return started, True
    return started, False


def _one_worker(box, calls, pending, outcomes, limits, output, printed, lane) -> str | None:
    """One worker for the `pending` calls, watched to its end (`_watch`); returns why it was cut short."""
    read_fd, write_fd = os.pipe()
    request = {
        "root": box.root,
        "result_fd": write_fd,
        "namespaces": box.walls.namespaces,
        "memory_bytes": limits.memory_bytes,
        "calls": [dict(module=calls[i].module, function=calls[i].function,
                       args=list(calls[i].args.values())) for i in pending],
    }
    try:
        with phase("start the worker (the zygote's torch import, waited for)", lane=lane):
            proc = zygote.start("worker", box.private, worker_env(), (write_fd,))
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    try:
        box.admit(proc.pid)              # before the request: no student code has run yet
    except BaseException:
        os.close(read_fd)
        kill_group(proc)
        raise
    reader = CappedReader(proc.stdout, output, printed)
    reader.start()
    try:
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    ended = _watch(proc, read_fd, calls, pending, outcomes, limits)
    reader.join(timeout=5)
    return ended


MAX_LINE_BYTES = 1 << 20           # one result line; more is a corrupted channel
TIMED_OUT = "timed out"            # why a worker was killed at a deadline (`_blame` words it for a call)


class _Progress:
    """Where a worker is, as its result messages say, and its deadline (`_watch`). `take` checks a message
    against the protocol (each module imported once, calls started and answered in order) before it is
    used: ValueError (or KeyError, ...) when it does not follow it."""

    def __init__(self, pending: list[int], outcomes: list, limits: Limits):
        self.pending, self.outcomes, self.limits = pending, outcomes, limits
        self.current: int | None = None          # index into pending of the call running
        self.importing: str | None = None        # module being imported
        self.imported: set[str] = set()
        self.expect_next = 0                     # the next call the worker may start or answer
        started = time.monotonic()
        self.overall = min(started + limits.import_seconds + limits.call_seconds * len(pending),
                           started + limits.left())      # the worker's own budget, within the grading's
        self.deadline = min(self.overall, started + limits.import_seconds)

    @property
    def finished(self) -> bool:
        return self.expect_next == len(self.pending)

    def take(self, line: bytes) -> None:
        msg = json.loads(line)
        if not isinstance(msg, dict):
            raise ValueError
        now = time.monotonic()
        if "importing" in msg:
            if msg["importing"] in self.imported or self.current is not None:
                raise ValueError
            self.imported.add(msg["importing"])
            self.importing, self.current = msg["importing"], None
            self.deadline = min(self.overall, now + self.limits.import_seconds)
        elif "start" in msg:
            if msg["start"] != self.expect_next:
                raise ValueError
            self.importing, self.current = None, msg["start"]
            self.deadline = min(self.overall, now + self.limits.call_seconds)
        elif "done" in msg:
            if msg["done"] != self.expect_next:
                raise ValueError
            self.outcomes[self.pending[msg["done"]]] = Outcome(msg.get("value"), msg.get("error"))
            self.current, self.importing = None, None
            self.expect_next += 1
            self.deadline = min(self.overall, now + self.limits.call_seconds)
        else:
            raise ValueError


def _watch(proc, read_fd, calls, pending, outcomes, limits) -> str | None:
    """Follow the result stream; on a hang or a death, blame the current call.
    Returns why the worker was cut short (TIMED_OUT, ...), None if it was not.

    Deadlines are absolute and no message extends them: the whole worker has
    one budget (the imports' plus every call's), and each call or import its
    own from the moment it began. Messages must follow the protocol (`_Progress`),
    else the channel is corrupted and the worker is killed. Once every call is
    answered the worker is done: it is killed with its session, never waited
    for (a child it left holding the result pipe once kept a grading to the
    worker's whole budget)."""
    sel = selectors.DefaultSelector()
    sel.register(read_fd, selectors.EVENT_READ)
    buffer = b""
    where = _Progress(pending, outcomes, limits)

    def cut_short(why: str) -> str:
        kill_group(proc)
        _blame(calls, pending, outcomes, where.current, where.importing, why, limits)
        return why

    try:
        while not where.finished:
            timeout = where.deadline - time.monotonic()
            if timeout <= 0 or not sel.select(timeout):
                return cut_short(TIMED_OUT)
            chunk = os.read(read_fd, 65536)
            if not chunk:
                try:
                    code = proc.wait(timeout=max(0.1, min(2.0, where.overall - time.monotonic())))
                except subprocess.TimeoutExpired:
                    kill_group(proc)
                    code = proc.returncode
                return cut_short(f"ended the grading process (exit status {code})")
            buffer += chunk
            if len(buffer) > MAX_LINE_BYTES and b"\n" not in buffer:
                return cut_short(CORRUPTED)
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    where.take(line)
                except (ValueError, KeyError, IndexError, TypeError, RecursionError):   # a nesting too deep too
                    return cut_short(CORRUPTED)
        return None
    finally:
        sel.close()
        os.close(read_fd)
        kill_group(proc)                # also when it ended itself: what it started in its session goes too


CORRUPTED = "corrupted the grader's result channel"


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
    hung = why == TIMED_OUT
    if hung:
        why = (did_not_finish(limits.call_seconds) if limits.left() > 0
               else "did not finish: the grading's time budget ran out")
    outcomes[pending[current]] = Outcome(error=f"{culprit.show()} {why}")
    if hung and culprit.group is not None:
        for i in pending:
            if outcomes[i] is None and calls[i].group == culprit.group:
                outcomes[i] = Outcome(error="not run: an earlier call in the same case group did not finish")
