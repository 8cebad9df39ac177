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
import re
import traceback

from .schema import JSON_SCALARS

ELLIPSIS = "…"
# a library's source location in an error: gloo's "[/__w/pytorch/.../unbound_buffer.cc:78] " and the like,
# which tell a student nothing and, cut short, would end a summary
_LIBRARY_PATH = re.compile(r"(?<![\w.-])\[?(?:[A-Za-z]:)?(?:[\\/][^\s\[\]:]+)+"
                           r"\.(?:cc|cpp|cxx|c|h|hpp|py|pyx)(?::\d+)?\]?:?\s*")


def without_library_paths(text: str) -> str:
    """`text` without the source locations a library puts in its errors (paths under assignments/
    are the student's and stay)."""
    return _LIBRARY_PATH.sub(lambda m: m.group(0) if "assignments" in m.group(0) else "", text).strip()


def shortened(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary and ended with an ellipsis when cut (a word
    longer than a fifth of the limit is cut inside, so that little is lost)."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    space = head.rfind(" ")
    if space >= (limit - 1) * 4 // 5:
        head = head[:space]
    return head.rstrip(" ,;:") + ELLIPSIS


MAX_PLAIN_DEPTH = 20


def plain(value, depth=0):
    """Student values as JSON-able plain data; anything else is a type error."""
    if depth > MAX_PLAIN_DEPTH:
        raise TypeError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    kind = type(value)
    if kind is int or kind is float:
        return value                # as int() or float() would give it, without the numbers ABCs' checks
    # plain() returns a JSON scalar of an exact type as it is: a row of only those (a tensor's `tolist()`)
    # is copied whole, what the loop below gives without a call per number
    if (kind is list or kind is tuple) and depth < MAX_PLAIN_DEPTH and set(map(type, value)) <= JSON_SCALARS:
        return list(value)
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


# torch errors whose own words do not say what to do: the hint goes first, so that no cut loses it
HINTS = {
    "modified by an inplace operation": ("autograd saved a tensor for backward that was then overwritten in "
                                         "place (for FSDP, the handout's question 2, Part B, says how to get "
                                         "weights back for backward)"),
}


def describe_exception(exc: BaseException) -> str:
    """The exception and the student's innermost frame, one line (with a hint first where
    `HINTS` knows the error)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "assignments" in f.filename]
    where = f" (assignments/{os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})" if frames else ""
    text = without_library_paths(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
    hint = next((f"{said}: " for known, said in HINTS.items() if known in text), "")
    return f"{type(exc).__name__}{': ' + hint + shortened(text, 300) if text else ''}{where}"
