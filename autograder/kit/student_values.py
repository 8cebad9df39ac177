"""What comes back from student code, as plain data and one-line errors.

Shared by the sandbox's worker (`sandbox.worker`), the gloo ranks
(`sandbox.gloo.ranks.main`) and the starter kit's local ranks
(`local`, which ships with this module): a returned value becomes
JSON-able data or a type error, an exception becomes one line naming the
student's innermost frame.
"""
from __future__ import annotations

import numbers
import os
import traceback


def plain(value, depth=0):
    """Student values as JSON-able plain data; anything else is a type error."""
    if depth > 20:
        raise TypeError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return plain(value.item(), depth + 1)
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"returned a {type(value).__module__}.{type(value).__qualname__}, "
                    f"which is not a plain number")


def describe_exception(exc: BaseException) -> str:
    """The exception and the student's innermost frame, one line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "assignments" in f.filename]
    where = f" (assignments/{os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})" if frames else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}{': ' + text[:300] if text else ''}{where}"
