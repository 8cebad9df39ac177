"""One long-lived grader per batch job slot: the grader's imports paid once.

`shardlab grade --out` (`platforms.batch`) used to start a fresh
`python -m shardlab.autograder.cli grade PATH --json` per submission, and
each paid the interpreter's start and the grader's imports (click, rich,
numpy, the questions, the reference: about 0.5 CPU-seconds here) for work
that does not depend on the submission. A service (`shardlab
grading-service`, a hidden command) is a process that pays them once
(`preload`), then, per request, forks a child that *is* that
command: `shardlab grade PATH --json --config COURSE ...`, with its stdout
and stderr in private unlinked files, in a session of its own, dying with
the service (PR_SET_PDEATHSIG). The service answers with the child's exit
code and output, exactly what batch read from the subprocess before.

Isolation (argued in docs/trust.md, "The batch's grading services"):

- The service runs no grading. It imports modules and then only forks,
  waits and reads files. Every module-level cache it holds is empty
  (the data-seed draw, the plan's case lists, the walls' probe: `lru_cache`s
  filled on first call, which is in a child). So every grader child starts
  from the same state, and none of it comes from a submission.
- A child grades one submission and exits (`os._exit`); nothing of it
  returns to the service, which reads only its exit code and output files.
- Student code never runs in a service's child either: every process that
  runs student code is forked from the batch's zygote (`sandbox.zygote`,
  which has imported torch and has run no student code), as before. A
  service is never an ancestor of student code.
- Supervision stays per submission: the service kills a child that
  outlives its timeout (SIGKILL to its session), sweeps what the child left
  (`sandbox.leftovers`: its folders and cgroups carry the child's pid) while
  the dead child's pid is still unreaped, so no other process can hold it,
  and only then reaps it.

Protocol: batch writes one JSON line per request, {"argv": [...],
"timeout": seconds}, to the service's stdin and reads one JSON line back:
{"pid": the child's, "returncode": n, "stdout": text, "stderr": text}, or
{"pid": ..., "timeout": true}.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable

from shardlab.autograder.sandbox.jail import die_with_parent
from shardlab.autograder.sandbox.zygote import fresh_standard_streams

# what a grading imports beyond the CLI (the service's entry), the lazy imports included (`python -X
# importtime` of one grading); torch is not among them: the grader never imports it on a warm machine
PRELOAD = (
    "shardlab.autograder.engine.grading",
    "shardlab.autograder.engine.plan",
    "shardlab.autograder.engine.probes",
    "shardlab.autograder.engine.answer_sheet",
    "shardlab.autograder.engine.writeup",
    "shardlab.autograder.engine.variants",
    "shardlab.autograder.kit.checks.buckets",
    "shardlab.autograder.kit.checks.comm4d",
    "shardlab.autograder.kit.checks.fsdp",
    "shardlab.autograder.kit.checks.pipeline",
    "shardlab.autograder.kit.timelines.overlap",
    "shardlab.autograder.kit.timelines.pipeline",
    "shardlab.autograder.questions",
    "shardlab.autograder.sandbox.gloo.group",
    "shardlab.autograder.sandbox.gloo.launch",
    "shardlab.autograder.sandbox.process",
    "shardlab.autograder.sandbox.leftovers",
    "shardlab.reference.cache",
    "shardlab.reference.memory_measure",
    "shardlab.reference.pipeline_schedule",
)
OUTPUT_LIMIT = 8 << 20        # bytes of a child's stdout kept (a report is tens of kilobytes)
ERROR_LIMIT = 64 << 10        # bytes of its stderr kept, the end of it
START_SECONDS = 60.0          # the service's own imports, on a loaded machine
REPLY_MARGIN_SECONDS = 60.0   # batch waits this much past a request's timeout: the kill and sweep
STOP_SECONDS = 30.0           # a stopping service's kill and sweep of the grading under way


class ServiceError(Exception):
    pass


class Stopped(Exception):
    """The service was told to stop (SIGTERM) while it waited for a grading."""


class GradingService:
    """Batch's handle on one service process (one job slot), started on its first request."""

    def __init__(self, env: dict[str, str] | None = None):
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.errors = tempfile.TemporaryFile()       # the service's own stderr: why it died, if it does
        self.lock = threading.Lock()

    def run(self, argv: list[str], timeout: float) -> dict:
        """`shardlab *argv` in a fresh fork of the service: its reply (see the module's
        protocol). Raises ServiceError when the service itself does not answer (it died
        or hangs): the caller then closes it and starts another."""
        with self.lock:
            if self.proc is None:
                self.proc = subprocess.Popen(       # `serve`, entered through the CLI (the layer above)
                    [sys.executable, "-m", "shardlab.autograder.cli", "grading-service"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                    start_new_session=True, env=self.env)
            if self.proc.poll() is not None:
                raise ServiceError(f"the grading service exited with status {self.proc.returncode}{self._why()}")
            assert self.proc.stdin is not None and self.proc.stdout is not None
            try:
                self.proc.stdin.write((json.dumps({"argv": argv, "timeout": timeout}) + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                raise ServiceError(f"the grading service is gone{self._why()}") from None
            try:
                ready, _, _ = select.select([self.proc.stdout], [], [], START_SECONDS + timeout + REPLY_MARGIN_SECONDS)
                line = self.proc.stdout.readline() if ready else b""
            except (ValueError, OSError):       # `close`, from the batch's thread, closed the stream under us
                line = b""
            try:
                reply = json.loads(line)
            except ValueError:
                raise ServiceError(f"the grading service did not answer{self._why()}") from None
            if not isinstance(reply, dict):
                raise ServiceError("the grading service answered nonsense")
            return reply

    def _why(self) -> str:
        """The last line the service wrote to its stderr, as ": <line>" (or nothing)."""
        try:
            lines = _tail(self.errors.fileno(), ERROR_LIMIT, end=True).strip().splitlines()
        except (ValueError, OSError):           # closed by `close` meanwhile: nothing more to say
            return ""
        return f": {lines[-1][:300]}" if lines else ""

    def close(self) -> None:
        """End the service: SIGTERM, on which it kills and sweeps a grading under way
        (`grade_once`) and exits; SIGKILL if it does not within STOP_SECONDS (its child
        then dies by its parent-death signal and the next grader sweeps what it left,
        `leftovers.sweep_dead`)."""
        proc = self.proc
        if proc is None:
            self.errors.close()
            return
        with contextlib.suppress(OSError):
            proc.terminate()
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for stream in (proc.stdin, proc.stdout, self.errors):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


# ---- the service process ----------------------------------------------------------------------


def preload() -> None:
    """Import what a grading imports, and nothing else: no call that fills a cache."""
    for module in PRELOAD:
        importlib.import_module(module)
    gc.freeze()          # loaded for good: a child's collector leaves these pages shared


def _grade_in_child(run: Callable[[], None], argv: list[str], out: int, err: int) -> None:
    """In the forked child: become `shardlab *argv` (`run`, the CLI's main, reading sys.argv)
    with stdout/stderr on `out`/`err`, run it, exit."""
    code: object = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)       # the service's handler is not the grader's
        os.setsid()
        die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))      # the service's pipes and files are not the grader's
        fresh_standard_streams()
        sys.argv = ["shardlab", *argv]
        try:
            run()
            code = 0
        except SystemExit as exc:
            code = exc.code
        atexit._run_exitfuncs()          # what a process's normal exit runs (the phases file, the zygote's socket)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _tail(fd: int, limit: int, end: bool) -> str:
    size = os.fstat(fd).st_size
    os.lseek(fd, max(0, size - limit) if end else 0, os.SEEK_SET)
    data = b""
    while len(data) < min(size, limit):
        chunk = os.read(fd, min(size, limit) - len(data))
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _kill_and_sweep(pid: int) -> None:
    """SIGKILL the child's session, sweep what it left while its pid is still its zombie's
    (nobody else can have that pid, so nothing of another grading is swept), then reap it."""
    from shardlab.autograder.sandbox import leftovers
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    leftovers.sweep(pid)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def grade_once(run: Callable[[], None], argv: list[str], timeout: float) -> dict:
    """Fork a grader child that runs `run` as `shardlab *argv`, wait for it at most
    `timeout` seconds: the reply."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _grade_in_child(run, argv, out.fileno(), err.fileno())
        exited = os.pidfd_open(pid)
        try:
            ready, _, _ = select.select([exited], [], [], timeout)
        except Stopped:                 # batch is ending (its Ctrl-C): leave nothing behind
            _kill_and_sweep(pid)
            raise
        finally:
            os.close(exited)
        if not ready:
            _kill_and_sweep(pid)
            return {"timeout": True, "pid": pid}
        _, status = os.waitpid(pid, 0)
        return {"pid": pid, "returncode": os.waitstatus_to_exitcode(status),
                "stdout": _tail(out.fileno(), OUTPUT_LIMIT, end=False),
                "stderr": _tail(err.fileno(), ERROR_LIMIT, end=True)}


def _stop(signum, frame) -> None:
    raise Stopped


def serve(run: Callable[[], None]) -> None:
    """The service: `preload`, then a reply per request line until stdin ends or SIGTERM.
    `run` is the CLI's main (`shardlab grading-service` passes it: the CLI is the layer above)."""
    preload()
    signal.signal(signal.SIGTERM, _stop)
    with contextlib.suppress(Stopped):
        for line in sys.stdin.buffer:
            try:
                request = json.loads(line)
                argv, timeout = [str(a) for a in request["argv"]], float(request["timeout"])
            except (ValueError, KeyError, TypeError):
                reply: dict = {"returncode": 3, "stdout": "", "stderr": "grading service: a malformed request"}
            else:
                reply = grade_once(run, argv, timeout)
            sys.stdout.buffer.write((json.dumps(reply) + "\n").encode())
            sys.stdout.buffer.flush()

