"""The `shardlab` command's entry point: `cli.main`, after starting a single
grading's zygote.

`shardlab grade PATH...` (one grading, not a batch: no --out, no
--gradescope-export) spends its first second in the zygote's torch import
(`sandbox.zygote`), which the gloo runs wait for. Started here, before the
CLI's own imports (click, rich, the course: about 0.1 s), that import runs
beside them instead of after them. `cli.grade` asks for the same zygote
(`zygote.shared()`); anything else, or a grading that stops early (a bad
option, a malformed course), only kills it again on the way out. A single
grading ends through `leave`: its exit handlers run and its output is
flushed, but the interpreter does not free what it loaded, a tenth of a
second after the report is out.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

BATCH_OPTIONS = ("--out", "--gradescope-export", "--help", "-h")   # no zygote of this process's


def _single_grading(args: list[str]) -> bool:
    return args[:1] == ["grade"] and not any(a.split("=")[0] in BATCH_OPTIONS for a in args)


def main() -> None:
    single = _single_grading(sys.argv[1:])
    if single:
        from shardlab.autograder.sandbox import zygote
        try:
            zygote.shared()
        except OSError:                 # `cli.grade` asks again, and a failed start falls back there
            zygote.forget_shared()
    from shardlab.autograder.cli import main as cli_main
    if not single:
        cli_main()
        return
    try:
        cli_main()
        code: str | int | None = None
    except SystemExit as exc:
        code = exc.code
    leave(code)


def leave(code: str | int | None) -> NoReturn:
    """Exit with `code` (as `sys.exit(code)` would) without the interpreter's
    teardown: the exit handlers run (the zygote killed and reaped, temporary
    folders removed, the phases written), the standard streams are flushed,
    and the process ends. Freeing every module a grading imported (numpy,
    torch's metadata, the course) is a tenth of a second of one core after
    the result is out, on every grading. Where a thread of ours is still
    alive (none is, after a grading), the interpreter's own exit runs, which
    waits for it."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:                           # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe: the interpreter's own status for it
            status = status or 120
    os._exit(status & 0xFF)
