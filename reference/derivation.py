"""Worked derivations: formula, substituted numbers, result with units.

The templates print these verbatim, so every number in a handout or answer
key is formatted here, from values the reference computed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shardlab.reference.specs import GB


@dataclass(frozen=True)
class Worked:
    """One answer with its derivation.

    quantity: what it is ("training state"); formula: symbolic; substituted:
    the formula with the config's numbers; value: the exact result (what the
    grader compares); shown: the value formatted with its unit.
    """

    quantity: str
    formula: str
    substituted: str
    value: Any
    shown: str


def n(x: float | int) -> str:
    """An integer with thousands separators, or a float to 4 significant digits."""
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    return f"{x:.4g}"


def gb(num_bytes: float) -> str:
    """Bytes as decimal GB (1 GB = 1e9 bytes), with the exact byte count."""
    exact = f"{num_bytes:,}" if isinstance(num_bytes, int) else f"{num_bytes:,.0f}"
    return f"{num_bytes / GB:,.2f} GB ({exact} bytes)"


def sci(x: float) -> str:
    """Scientific notation for seconds, FLOP/s and bandwidths."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    return f"{x:.3e}"
