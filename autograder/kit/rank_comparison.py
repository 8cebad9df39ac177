"""Comparators for values that come back from gloo scenarios: one value per
rank (a list), each a dict. They follow the engine's contract:
`problem(expected, got) -> None | short reason`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


def per_rank_values(got, key: str | None) -> list | str:
    """Each rank's value of `key` (its whole result dict for key None), or a reason."""
    if not isinstance(got, list) or not got:
        return "returned no per-rank results"
    for r, value in enumerate(got):
        if not isinstance(value, dict) or (key is not None and key not in value):
            return f"rank {r} returned no {key or 'result'!r}"
    return [value[key] if key is not None else value for value in got]


def _for_rank(expected, r: int, per_rank: bool):
    return expected[r] if per_rank else expected


def _rank_count(expected, values: list, per_rank: bool) -> str | None:
    if per_rank and len(values) != len(expected):
        return f"{len(values)} ranks answered, expected {len(expected)}"
    return None


def excess(expected, got, atol: float, rtol: float) -> float:
    """How far `got` lies beyond |got - expected| <= atol + rtol * |expected| at its worst entry
    (0.0 within it; inf for another shape, a non-finite or a non-numeric value)."""
    try:
        e, g = np.asarray(expected, dtype=np.float64), np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return float("inf")
    if e.shape != g.shape or not np.all(np.isfinite(g)):
        return float("inf")
    return float(np.max(np.abs(g - e) - (atol + rtol * np.abs(e)), initial=0.0))


def constant_factor(pairs: list[tuple[Any, Any]], atol: float, rtol: float) -> float | None:
    """The c with every `got` = c * `expected` within the tolerance (`excess`), over all
    (expected, got) pairs, or None (also for a c that `factor_text` says as 1: gradients a
    hair off are wrong, not scaled): c is the least-squares fit, then checked entry by entry."""
    try:
        es = [np.asarray(e, dtype=np.float64).ravel() for e, _ in pairs]
        gs = [np.asarray(g, dtype=np.float64).ravel() for _, g in pairs]
    except (TypeError, ValueError):
        return None
    if not es or any(e.shape != g.shape for e, g in zip(es, gs)):
        return None
    e, g = np.concatenate(es), np.concatenate(gs)
    if not np.all(np.isfinite(g)) or float(e @ e) == 0.0:
        return None
    c = float(e @ g) / float(e @ e)
    if factor_text(c) == "1":          # within 1e-3 of the right scale: no factor to speak of
        return None
    return c if excess(c * e, g, atol, rtol) == 0.0 else None


def factor_text(c: float) -> str:
    """A factor as feedback says it: "2" for 2.0000001, else three significant digits."""
    return f"{round(c):d}" if abs(c - round(c)) < 1e-3 else f"{c:.3g}"


@dataclass(frozen=True)
class StatesMatch:
    """Every rank's final state (name -> nested lists) equals the expected one
    within |got - expected| <= atol + rtol * |expected| (FP32 training). The
    expected state is one dict for all ranks, or a list of one per rank when
    the ranks hold different parts of the model (pipeline stages). A failure
    names the worst entry over all ranks (the first rank at a tie)."""

    key: str = "state"
    rtol: float = 1e-4
    atol: float = 1e-5

    def problem(self, expected: dict | list, got) -> str | None:
        states = per_rank_values(got, self.key)
        if isinstance(states, str):
            return states
        per_rank = isinstance(expected, list)
        if why := _rank_count(expected, states, per_rank):
            return why
        worst = (0.0, -1, "")
        for r, state in enumerate(states):
            want = _for_rank(expected, r, per_rank)
            if not isinstance(state, dict) or sorted(state) != sorted(want):
                names = sorted(state) if isinstance(state, dict) else state
                return f"rank {r}'s state has entries {names}, expected {sorted(want)}"
            worst = max([worst, *((self._excess(want[k], state[k]), r, k) for k in want)], key=lambda w: w[0])
        amount, r, name = worst
        if amount <= 0:
            return None
        disagree = not per_rank and any(self._excess(states[0][k], s[k]) > 0 for s in states[1:] for k in s)
        hint = " (and the ranks disagree with each other)" if disagree else ""
        return (f"rank {r}: {name!r} differs from single-process training by up to "
                f"{amount:.2g} beyond the tolerance{hint}")

    def _excess(self, expected, got) -> float:
        return excess(expected, got, self.atol, self.rtol)

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


@dataclass(frozen=True)
class StepCheck:
    """Applies `check(expected, step_record) -> None | reason` to every step of every rank;
    with `context`, `check(expected, step_record, rank_value[context])` (None when the rank
    has no such entry): what the rank's steps are judged against beside the expected value."""

    check: Callable[..., str | None]
    key: str = "steps"
    context: str | None = None

    def problem(self, expected, got) -> str | None:
        runs = per_rank_values(got, self.key)
        if isinstance(runs, str):
            return runs
        for r, steps in enumerate(runs):
            if not isinstance(steps, list):
                return f"rank {r} returned no {self.key!r}"
            extra = () if self.context is None else (got[r].get(self.context),)
            for k, step in enumerate(steps, start=1):
                why = self.check(expected, step, *extra)
                if why:
                    return f"rank {r}, step {k}: {why}"
        return None

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


@dataclass(frozen=True)
class RankCheck:
    """Applies `check(expected, rank_value) -> None | reason` to every rank's
    `key` (or to the rank's whole result when key is None). With `per_rank`,
    `expected` is a list of one entry per rank (what differs from stage to
    stage of a pipeline) and rank r is checked against `expected[r]`."""

    check: Callable[[Any, Any], str | None]
    key: str | None = None
    per_rank: bool = False

    def problem(self, expected, got) -> str | None:
        values = per_rank_values(got, self.key)
        if isinstance(values, str):
            return values
        if why := _rank_count(expected, values, self.per_rank):
            return why
        for r, value in enumerate(values):
            why = self.check(_for_rank(expected, r, self.per_rank), value)
            if why:
                return f"rank {r}: {why}"
        return None

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None
