"""The students' public checks: this file is copied verbatim into the starter
kit (`tests/shardlab_check.py`) and the notebook, so it imports nothing from
shardlab. It judges a returned value the way the grader's `Compare` kinds do
('int', 'real', 'int_or_none', 'real_or_none', 'int_dict', 'exact') and, when
a wrong value equals a known mistake's value, names the mistake.
"""
import importlib
import math

RTOL, ATOL = 1e-6, 1e-12


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _reason(kind, expected, got):
    """None if `got` is right, else why not."""
    if kind.endswith("_or_none") and (expected is None or got is None):
        return None if expected is got else ("expected None" if expected is None else "returned None")
    kind = kind.replace("_or_none", "")
    if kind == "int_dict":
        if not isinstance(got, dict) or set(got) != set(expected):
            return f"expected a dict with keys {sorted(expected)}"
        kinds = {k: type(v).__name__ for k, v in got.items() if not isinstance(v, int) or isinstance(v, bool)}
        return f"values must be ints, got {kinds}" if kinds else (None if got == expected else "wrong value")
    if kind == "int" and not (isinstance(got, int) and not isinstance(got, bool)):
        return f"returned {type(got).__name__}, expected an int"
    if kind == "real":
        if not _number(got) or got != got:
            return f"returned {got!r}, expected a number"
        if math.isinf(expected) or math.isinf(got):
            return None if got == expected else "wrong value"
        return None if math.isclose(got, expected, rel_tol=RTOL, abs_tol=ATOL) else "wrong value"
    return None if got == expected else "wrong value"


def check(module, function, args, expected, kind, note="", mistakes=()):
    """Call `assignments.<module>.<function>(**args)` and assert it returns `expected`.
    mistakes: (value a known mistake gives, what that mistake is) pairs."""
    fn = getattr(importlib.import_module(f"assignments.{module}"), function)
    got = fn(**args)
    reason = _reason(kind, expected, got)
    if reason is None:
        return
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    msg = f"{function}({shown}): {reason}"
    if reason == "wrong value":
        msg += f", expected {expected!r}, got {got!r}"
    if note:
        msg += f" [{note}]"
    for value, message in mistakes:
        if _reason(kind, value, got) is None:
            msg += f" -- this {message}"
            break
    raise AssertionError(msg)
