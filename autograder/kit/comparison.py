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
from dataclasses import dataclass
from typing import Any, Protocol

RTOL, ATOL = 1e-6, 1e-12
WRONG = "wrong value"


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


def public_feedback(problem: str, expected: Any, got_shown: str, note: str = "", mistake: str | None = None) -> str:
    """What failed in a public case, as the grader and the kit word it (after "<call>: "):
    "why[, expected E, got G] [note] — this <mistake>"."""
    what = problem
    if problem == WRONG:
        what += f", expected {show_value(expected)}, got {got_shown}"
    if note:
        what += f" [{note}]"
    if mistake:
        what += f" — this {mistake}"
    return what


def check(module: str, function: str, args: dict, expected: Any, kind: str, rtol: float = RTOL,
          atol: float = ATOL, note: str = "", mistakes=()) -> None:
    """The kit's public check of one case: call `assignments.<module>.<function>(**args)`
    and raise AssertionError, worded like the grader's feedback, unless it
    returns `expected`. mistakes: (value a known mistake gives, what that
    mistake is) pairs, named when the returned value equals one."""
    fn = getattr(importlib.import_module(f"assignments.{module}"), function)
    got = fn(**args)
    reason = judge(kind, expected, got, rtol, atol)
    if reason is None:
        return
    mistake = next((message for value, message in mistakes if judge(kind, value, got, rtol, atol) is None), None)
    raise AssertionError(f"{call_text(function, args)}: "
                         f"{public_feedback(reason, expected, show_value(got), note, mistake)}")


def call_text(function: str, args: dict) -> str:
    """A public call as `check`'s messages name it: `function(name=value, ...)`."""
    return f"{function}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
