"""The comparison rules: when is a returned value right?

One module for the grader and the students' kit. The grader judges every
value with a `Comparator` (a `Compare` for plain values, the comparators of
`rank_comparison` for per-rank results); the starter kit and the
notebook carry this very file (the kit as shardlab_local/comparison.py) and call `check` on each
public case, so a student sees the grader's verdict and wording. That is why
it imports nothing but the standard library.

Kinds of plain values (docs/spec.md, "Conventions the grader relies on"):
'int' (an exact integer, not a bool), 'real' (relative tolerance rtol,
default 1e-6, with an absolute floor atol for values near 0; infinities
must match exactly), 'int_or_none' / 'real_or_none' (None is a legal
answer and must match None), 'int_dict' (the same keys, each value an exact
integer) and 'exact' (plain equality of lists, dicts, strings).
"""
from __future__ import annotations

import importlib
import math
import numbers
import re
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

RTOL, ATOL = 1e-6, 1e-12
WRONG = "wrong value"
CALL_SECONDS = 5.0      # the grader's limit on one call of a student function (`sandbox.process.Limits`)


class Comparator(Protocol):
    """What a part's `compare` must be (`Part.compare`)."""

    def problem(self, expected: Any, got: Any) -> str | None:
        """None when `got` is right, else a short reason ("wrong value" when
        the value merely differs). `expected` is the reference's value for
        the call, `got` what the student's code returned (untrusted: any
        object a student could build out of plain data)."""

    def __call__(self, expected: Any, got: Any) -> bool:
        """`problem(expected, got) is None`."""


def is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _sorted(keys) -> list:
    try:
        return sorted(keys)
    except TypeError:                   # keys of mixed types: sort their reprs
        return sorted(map(repr, keys))


def judge(kind: str, expected: Any, got: Any, rtol: float = RTOL, atol: float = ATOL) -> str | None:
    """None if `got` is right for a value of this kind, else why not."""
    if kind.endswith("_or_none"):
        if expected is None or got is None:
            return None if expected is got else ("expected None" if expected is None else "returned None")
        kind = kind.removesuffix("_or_none")
    if kind == "int_dict":
        if not isinstance(got, dict):
            return f"returned {type(got).__name__}, expected a dict"
        if set(got) != set(expected):
            return f"returned keys {_sorted(got)}, expected keys {_sorted(expected)}"
        for key in expected:
            if not is_int(got[key]):
                return f"[{key!r}] is {type(got[key]).__name__}, expected an int"
        return None if got == expected else WRONG
    if kind == "int":
        if not is_int(got):
            return f"returned {type(got).__name__}, expected an int"
        return None if got == expected else WRONG
    if kind == "real":
        if not is_real(got):
            return f"returned {type(got).__name__}, expected a number"
        if math.isnan(got):
            return "returned NaN"
        if math.isinf(expected) or math.isinf(got):
            return None if got == expected else WRONG
        return None if math.isclose(got, expected, rel_tol=rtol, abs_tol=atol) else WRONG
    return None if got == expected else WRONG


@dataclass(frozen=True)
class Compare:
    """A `Comparator` for one plain value: `judge` with this kind and tolerance."""

    kind: str = "real"
    rtol: float = RTOL
    atol: float = ATOL

    def problem(self, expected: Any, got: Any) -> str | None:
        return judge(self.kind, expected, got, self.rtol, self.atol)

    def __call__(self, expected: Any, got: Any) -> bool:
        return self.problem(expected, got) is None


def show_value(value: Any) -> str:
    """A value as feedback shows it: integers with thousands separators, the rest as repr."""
    return f"{value:,}" if is_int(value) else repr(value)


# `judge`'s words for a value of the wrong type: the value itself is shown beside them in a public case
_WRONG_TYPE = re.compile(r"returned \w+, expected (?:an int|a number|a dict)")


def public_feedback(problem: str, expected: Any, got_shown: str, note: str = "", mistake: str | None = None) -> str:
    """What failed in a public case, as the grader and the kit word it (after "<call>: "):
    "why[, expected E, got G] [note] — this <mistake>": every wrong value beside the expected
    one, a None or a value of the wrong type included."""
    what = problem
    if problem == WRONG:
        what += f", expected {show_value(expected)}, got {got_shown}"
    elif problem == "expected None":        # the value returned where None was right, and the reverse
        what += f", got {got_shown}"
    elif problem == "returned None":
        what += f", expected {show_value(expected)}"
    elif _WRONG_TYPE.fullmatch(problem):
        what += f": got {got_shown}, expected {show_value(expected)}"
    if note:
        what += f" [{note}]"
    if mistake:
        what += f" — this {mistake}"
    return what


def did_not_finish(seconds: float) -> str:
    """How the grader and the kit say that a call ran past its limit."""
    return f"did not finish within {seconds:g} s"


class _Overran(BaseException):
    """The alarm's interruption of a call past its limit. A BaseException, so that
    the student's own `except Exception` does not swallow it."""


def call_within(fn: Callable, args: dict, seconds: float) -> tuple[bool, Any]:
    """(finished, value): `fn(**args)` and whether it returned within `seconds`,
    as the grader's deadline judges one call (the module's import is not
    counted: import it first). What the call raises propagates.

    In the main thread of a system with SIGALRM (Linux, macOS), an alarm
    interrupts the call at the limit. An alarm already set (pytest-timeout's
    bound on the whole test) is honoured: when it is due first, it is left to
    fire; otherwise its handler and remaining time are put back as soon as
    the call ends or is interrupted, so a call that swallows the
    interruption and runs on is still stopped by it. Elsewhere (Windows, a
    thread other than the main one) the call is judged when it returns, and
    an endless one is left to pytest-timeout."""
    start = time.monotonic()

    def in_time() -> bool:
        return time.monotonic() - start <= seconds

    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    outer_handler = signal.getsignal(signal.SIGALRM) if alarm else None
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0] if alarm else 0.0
    if outer_handler is None or 0 < outer_left <= seconds:     # no alarm here, or the outer one is due first
        value = fn(**args)
        return in_time(), value

    def restore() -> None:
        # the timer first: once this call's alarm is replaced, it cannot fire into the outer handler
        left = max(outer_left - (time.monotonic() - start), 1e-3) if outer_left else 0.0
        signal.setitimer(signal.ITIMER_REAL, left)
        signal.signal(signal.SIGALRM, outer_handler)

    def overran(signum, frame):
        restore()
        raise _Overran

    signal.signal(signal.SIGALRM, overran)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, seconds)
            value = fn(**args)
        finally:            # a late alarm lands in the except below
            if signal.getsignal(signal.SIGALRM) is overran:
                restore()
        return in_time(), value
    except _Overran:
        return False, None


def check(module: str, function: str, args: dict, expected: Any, kind: str, rtol: float = RTOL,
          atol: float = ATOL, note: str = "", mistakes=(), seconds: float = CALL_SECONDS) -> None:
    """The kit's public check of one case: call `assignments.<module>.<function>(**args)`
    and raise AssertionError, worded like the grader's feedback, unless it
    returns `expected` within `seconds` (the grader's limit on one call; the
    module's import is not counted, as the grader gives it its own).
    mistakes: (value a known mistake gives, what that mistake is) pairs,
    named when the returned value equals one."""
    fn = getattr(importlib.import_module(f"assignments.{module}"), function)
    finished, got = call_within(fn, args, seconds)
    if not finished:
        raise AssertionError(f"{call_text(function, args)}: {did_not_finish(seconds)}")
    reason = judge(kind, expected, got, rtol, atol)
    if reason is None:
        return
    mistake = next((message for value, message in mistakes if judge(kind, value, got, rtol, atol) is None), None)
    raise AssertionError(f"{call_text(function, args)}: "
                         f"{public_feedback(reason, expected, show_value(got), note, mistake)}")


MIB = 2**20          # a bucket's MB, as PyTorch DDP's bucket_cap_mb (docs/spec.md, conventions)


def call_text(function: str, args: dict) -> str:
    """A public call as `check`'s messages name it: `function(name=value, ...)`; a size in MB
    (an argument named `*_mb`) that is a whole number of bytes reads as the size it is,
    `bucket_size_mb=1 byte (9.54e-07 MB)`."""
    return f"{function}({', '.join(f'{k}={_shown(k, v)}' for k, v in args.items())})"


def _shown(name: str, value) -> str:
    if name.endswith("_mb") and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        size = value * MIB
        if float(size).is_integer():
            n = int(size)
            return f"{n} byte{'' if n == 1 else 's'} ({value:.3g} MB)"
    return repr(value)
