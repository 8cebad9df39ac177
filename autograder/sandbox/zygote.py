"""One torch import, forked for every process that runs student code.

Importing torch costs about as much CPU as a whole grading's gloo runs
(2 s here), and a grading needs it in two processes: the plain sandbox's
worker (student modules import torch) and the gloo fork server. The zygote
is a trusted process that imports torch and the harness once
(`ranks.main.preload`: the scenarios, the proxy, the jail's path lists; the
worker's protocol) and then only forks: on request, a child that becomes a
sandbox worker or a fork server, exactly as if `python -I -m <module>` had
been started (`Zygote.popen` returns a handle with the parts of
subprocess.Popen the callers use).

The zygote never imports student code, the reference's answers or anything
a grading computed, and it never runs a torch op: every child is a fresh
fork of that clean state, so grading A then B shows B nothing of A. (Its
only later imports are torch's own modules that one kind of child needs,
before the first such fork: `PRELOADS`.) The
child walls itself in exactly as before (`sandbox.worker`, `gloo.ranks.main`);
its caller puts it in the submission's cgroup before sending it anything.

Where the zygote lives: a grading starts a private one (`shared()`, on first
use; it dies with the grader), unless the environment variable
SHARDLAB_ZYGOTE names the socket of one already running, which is how batch
grading (`platforms.batch`) shares one across its submissions
(`serving`). The socket's folder is 0700: only the
grader's user reaches it, and a jailed student process sees none of the
grader's files.

Protocol (one Unix stream socket per client, SCM_RIGHTS for descriptors):
the client sends one JSON line {"module", "cwd", "env", "targets"} with the
child's descriptors attached (its stdin, stdout/stderr, then one per extra
target, then a status pipe the zygote keeps), the zygote answers
{"pid": n}; when the child ends, the zygote writes its exit code (as
`Popen.returncode` would be) into the status pipe and closes it.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import cast

from shardlab.autograder.sandbox import unix_socket

ENV = "SHARDLAB_ZYGOTE"
START_SECONDS = 60.0                 # the zygote's torch import, on a loaded machine
MODULES = {                          # what a child may become: its main function, as `python -m` would run it
    "worker": ("shardlab.autograder.sandbox.worker", "main"),
    "forkserver": ("shardlab.autograder.sandbox.gloo.ranks.main", "serve"),
    "fsdp2": ("shardlab.reference.fsdp2_agreement", "rank_main"),     # a trusted reference rank
}
# torch's own modules that one kind of child needs and the others do without, imported in the zygote
# before the first such child is forked (`_preload_for`), so every later one shares them instead of
# importing them itself: FSDP2, and the torch._dynamo its first `fully_shard` call imports, for each
# reference rank of a machine's first grading (about 0.5-1 CPU-second a rank). Only torch's own: the
# zygote never imports the reference or anything of the grader's. A private zygote only (one grading's):
# a batch's serves every later submission too, and 39 MB more of its own memory would make each of
# their forks copy that many more page-table entries.
PRELOADS: dict[str, tuple[str, ...]] = {"fsdp2": ("torch.distributed.fsdp", "torch._dynamo")}


class ZygoteError(Exception):
    pass


class ZygoteProc:
    """The subset of subprocess.Popen that the sandbox uses, for a zygote's child."""

    def __init__(self, pid: int, stdin, stdout, status_fd: int):
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None
        self._status = status_fd

    def _read_status(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        sel = selectors.DefaultSelector()
        sel.register(self._status, selectors.EVENT_READ)
        try:
            if not sel.select(timeout):
                return None
        finally:
            sel.close()
        data = os.read(self._status, 64)
        os.close(self._status)
        # no code: the zygote died before reaping it (its children die with it)
        self.returncode = int(data) if data.strip() else -signal.SIGKILL
        return self.returncode

    def poll(self) -> int | None:
        return self._read_status(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read_status(timeout if timeout is not None else START_SECONDS)
        if code is None:
            if timeout is not None:
                raise subprocess.TimeoutExpired("zygote child", timeout)
            code = self.returncode = -signal.SIGKILL      # the zygote never reaped it: treat as killed
        return code


class Zygote:
    """A client of one zygote process (a private one, or the batch's)."""

    def __init__(self, path: str | None = None):
        self.lock = threading.Lock()        # the probes ask from their own threads
        self.proc = None
        if path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix_socket.connect(self.sock, path)
        else:
            ours, theirs = socket.socketpair()
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "shardlab.autograder.sandbox.zygote"],
                stdin=theirs.fileno(), stdout=subprocess.DEVNULL, start_new_session=True, env=zygote_env())
            theirs.close()
            self.sock = ours
        self.reader = self.sock.makefile("rb")

    def popen(self, module: str, cwd: str, env: dict[str, str], extra_fds: tuple[int, ...] = (),
              argv: tuple[str, ...] = (), output: int | None = None) -> ZygoteProc:
        """Fork a child that runs `module`'s main (MODULES) with its stdin and
        stdout/stderr on fresh pipes (or stdout/stderr on `output`, a
        descriptor), `extra_fds` at the same numbers in the child, in its own
        session, in `cwd` with exactly `env` and `argv` after the module's name."""
        stdin_r, stdin_w = os.pipe()
        stdout_r: int | None
        stdout_r, stdout_w = os.pipe() if output is None else (None, os.dup(output))
        status_r, status_w = os.pipe()
        request = {"module": module, "cwd": cwd, "env": env, "targets": [0, 1, *extra_fds], "argv": list(argv)}
        try:
            with self.lock:
                socket.send_fds(self.sock, [(json.dumps(request) + "\n").encode()],
                                [stdin_r, stdout_w, *extra_fds, status_w])
                sel = selectors.DefaultSelector()
                sel.register(self.sock, selectors.EVENT_READ)
                ready = sel.select(START_SECONDS)
                sel.close()
                line = self.reader.readline() if ready else b""
            pid = json.loads(line)["pid"] if line else None
        except (OSError, ValueError, KeyError) as exc:
            pid, line = None, str(exc).encode()
        finally:
            for fd in (stdin_r, stdout_w, status_w):
                os.close(fd)
        if not pid:
            for end in (stdin_w, stdout_r, status_r):     # our ends of the pipes
                if end is not None:
                    os.close(end)
            raise ZygoteError(f"the zygote did not fork a {module}: {line[:200]!r}")
        return ZygoteProc(pid, os.fdopen(stdin_w, "wb"), None if stdout_r is None else os.fdopen(stdout_r, "rb"),
                          status_r)

    def close(self) -> None:
        self.sock.close()
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

def worker_env(**extra: str) -> dict[str, str]:
    """The whole environment of a process that runs student code: nothing of
    the grader's leaks in (tokens, paths, its PATH), hashing and threads are
    fixed (`jail.STUDENT_ENV`, which `jail.confine` sets again in the
    student's process: what it reads in /proc/self/environ is this)."""
    from shardlab.autograder.sandbox.jail import STUDENT_ENV
    return {**STUDENT_ENV, **extra}


def zygote_env() -> dict[str, str]:
    """The zygote's own: a child's hash seed is its zygote's, fixed at start."""
    return worker_env()


def start(module: str, cwd: str, env: dict[str, str], pass_fds: tuple[int, ...] = (),
          argv: tuple[str, ...] = (), output: int | None = None):
    """`python -I -u -m <module> *argv` (MODULES), in its own session, with
    stdin and stdout+stderr on pipes (or stdout+stderr on `output`): forked
    from this grader's zygote, or started afresh if the zygote cannot fork it
    (then the next call starts a new zygote). Returns a subprocess.Popen or a
    ZygoteProc."""
    try:
        return shared().popen(module, cwd, env, pass_fds, argv, output)
    except (ZygoteError, OSError):
        forget_shared()
    out = subprocess.PIPE if output is None else output
    return subprocess.Popen([sys.executable, "-I", "-u", "-m", MODULES[module][0], *argv],
                            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                            pass_fds=pass_fds, start_new_session=True, cwd=cwd, env=env)


def reference_rank(args: list[str], log) -> object:
    """Launcher of the `fully_shard` reference's ranks (`fsdp2_agreement.run_group`):
    a trusted rank forked from the zygote, which has imported torch already,
    its output into `log` (an open file)."""
    return start("fsdp2", "/", worker_env(), argv=tuple(args), output=log.fileno())


@contextlib.contextmanager
def serving() -> Iterator[dict[str, str]]:
    """A zygote for many graders (batch grading), for the block: yields the
    environment entry ({ENV: socket path}) to give each grader process."""
    from shardlab.autograder.sandbox.leftovers import private_folder    # the batch's process, not the zygote's
    folder = private_folder("zygote")          # 0700: only this user
    path = os.path.join(folder, "zygote.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_socket.bind(listener, path)
    listener.listen(64)
    proc = subprocess.Popen([sys.executable, "-I", "-m", "shardlab.autograder.sandbox.zygote", "--listen"],
                            stdin=listener.fileno(), stdout=subprocess.DEVNULL, start_new_session=True,
                            env=zygote_env())
    listener.close()
    try:
        yield {ENV: path}
    finally:
        proc.kill()              # its fork servers die with it (their parent-death signal)
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


_SHARED: Zygote | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> Zygote:
    """This grader's zygote: the batch's (SHARDLAB_ZYGOTE) or a private one, started once."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Zygote(os.environ.get(ENV) or None)
        return _SHARED


def shared_pid() -> int | None:
    """The pid of this grader's private zygote, if it started one (tests use it
    to tell the zygote from anything a submission left behind)."""
    with _SHARED_LOCK:
        return _SHARED.proc.pid if _SHARED is not None and _SHARED.proc is not None else None


def forget_shared() -> None:
    """After a failure: the next `shared()` starts afresh."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is not None:
            _SHARED.close()
        _SHARED = None


atexit.register(forget_shared)


# ---- the zygote process ---------------------------------------------------------------------


def fresh_standard_streams() -> None:
    """sys.stdin/stdout/stderr anew on descriptors 0, 1 and 2, unbuffered (as `python -u`
    has): a forked child's streams after it has moved its descriptors there."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace")


def _become(request: dict, fds: list[int], keep_status: int) -> None:
    """In the forked child: take the descriptors, session, folder and
    environment a fresh `python -I -m module` would have, then run its main."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    os.close(keep_status)
    targets = request["targets"]
    # first above every target number, so no move overwrites a descriptor still to be moved
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, max(targets) + 1) for fd in fds]
    for fd, target in zip(high, targets):
        os.dup2(fd, target)
    os.dup2(1, 2)
    start = 3
    for fd in sorted(set(targets)):
        if fd >= start:
            os.closerange(start, fd)
            start = fd + 1
    os.closerange(start, os.sysconf("SC_OPEN_MAX"))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # a fresh process seeds torch's generator (and numpy's) afresh; every fork would share the
    # zygote's (Python's `random` reseeds itself after a fork)
    if "torch" in sys.modules:
        sys.modules["torch"].seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch.distributed" in sys.modules:
        # read at import, in the zygote: read it again from this child's environment
        sys.modules["torch.distributed"].set_debug_level_from_env()
    fresh_standard_streams()
    module, function = MODULES[request["module"]]
    sys.argv = [module, *request.get("argv", [])]
    import importlib
    getattr(importlib.import_module(module), function)()


@contextlib.contextmanager
def _imports_kept_shared() -> Iterator[None]:
    """The zygote's imports, in the block: no collection while they run (what an import
    makes lives for good, and torch's import ran about 0.2 s of collections, on every
    grading's critical path), then what they loaded is frozen, never collected, so a
    child's collector leaves those pages shared; every child collects as a fresh process would."""
    import gc
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _serve(clients: list[socket.socket], listener: socket.socket | None) -> None:
    with _imports_kept_shared():
        from shardlab.autograder.sandbox.gloo.ranks.main import preload
        import shardlab.autograder.sandbox.worker  # noqa: F401 - the plain sandbox's worker, ready to run
        preload()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    statuses: dict[int, int] = {}                 # child pid -> its status pipe
    sel = selectors.DefaultSelector()
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    if listener is not None:
        sel.register(listener, selectors.EVENT_READ, "listen")
    for c in clients:
        sel.register(c, selectors.EVENT_READ, "client")
    while True:
        for key, _ in sel.select():
            if key.data == "wake":
                os.read(wake_r, 4096)
                _reap(statuses)
            elif key.data == "listen":
                assert listener is not None             # registered only when there is one
                conn, _ = listener.accept()
                sel.register(conn, selectors.EVENT_READ, "client")
            else:
                conn = cast(socket.socket, key.fileobj)   # every client is registered as its socket
                if not _answer(conn, statuses, preloads=listener is None):
                    sel.unregister(conn)
                    conn.close()
                    if listener is None:          # a private zygote ends with its grader
                        os._exit(0)


def _answer(conn: socket.socket, statuses: dict[int, int], preloads: bool) -> bool:
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 16)
    except OSError:
        return False
    if not data:
        for fd in fds:
            os.close(fd)
        return False
    try:
        request = json.loads(data)
        if request["module"] not in MODULES or len(fds) != len(request["targets"]) + 1:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        for fd in fds:
            os.close(fd)
        conn.sendall(b'{"error": "bad request"}\n')
        return True
    *child_fds, status = fds
    if preloads:
        _preload_for(request["module"])
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _become(request, child_fds, status)
            code = 0
        finally:
            os._exit(code)
    for fd in child_fds:
        os.close(fd)
    statuses[pid] = status
    _reap(statuses)                # a child may already have ended
    conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    return True


def _preload_for(module: str) -> None:
    """Import what this kind of child needs first (PRELOADS), as the zygote's first imports were."""
    import importlib
    missing = [name for name in PRELOADS.get(module, ()) if name not in sys.modules]
    if missing:
        with _imports_kept_shared():
            for name in missing:
                importlib.import_module(name)


def _reap(statuses: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
            except OSError:
                pass
            os.close(fd)


def main() -> None:
    conn = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    if "--listen" in sys.argv:
        _serve([], conn)
    else:
        _serve([conn], None)


if __name__ == "__main__":
    main()
