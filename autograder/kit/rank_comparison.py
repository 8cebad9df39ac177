"""Comparators for values that come back from gloo scenarios: one value per
rank (a list), each a dict. They follow the engine's contract:
`problem(expected, got) -> None | short reason`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


def _per_rank(got, key: str | None) -> list | str:
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


@dataclass(frozen=True)
class StatesMatch:
    """Every rank's final state (name -> nested lists) equals the expected one
    within |got - expected| <= atol + rtol * |expected| (FP32 training). The
    expected state is one dict for all ranks, or a list of one per rank when
    the ranks hold different parts of the model (pipeline stages)."""

    key: str = "state"
    rtol: float = 1e-4
    atol: float = 1e-5

    def problem(self, expected: dict | list, got) -> str | None:
        states = _per_rank(got, self.key)
        if isinstance(states, str):
            return states
        per_rank = isinstance(expected, list)
        if why := _rank_count(expected, states, per_rank):
            return why
        for r, state in enumerate(states):
            want = _for_rank(expected, r, per_rank)
            if not isinstance(state, dict) or sorted(state) != sorted(want):
                names = sorted(state) if isinstance(state, dict) else state
                return f"rank {r}'s state has entries {names}, expected {sorted(want)}"
            worst = max(((self._excess(want[k], state[k]), k) for k in want), default=(0.0, ""))
            if worst[0] > 0:
                disagree = not per_rank and r > 0 and any(self._excess(states[0][k], state[k]) > 0 for k in state)
                hint = " (and the ranks disagree with each other)" if disagree else ""
                return (f"rank {r}: {worst[1]!r} differs from single-process training by up to "
                        f"{worst[0]:.2g} beyond the tolerance{hint}")
        return None

    def _excess(self, expected, got) -> float:
        try:
            e, g = np.asarray(expected, dtype=np.float64), np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError):
            return float("inf")
        if e.shape != g.shape:
            return float("inf")
        if not np.all(np.isfinite(g)):
            return float("inf")
        return float(np.max(np.abs(g - e) - (self.atol + self.rtol * np.abs(e)), initial=0.0))

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
        runs = _per_rank(got, self.key)
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
        values = _per_rank(got, self.key)
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
