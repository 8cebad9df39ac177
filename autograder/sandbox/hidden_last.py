"""Hidden inputs last: no value a student is shown comes from a process that could know one.

A student function may record every input it is called with (module
globals) and return them, packed, from a later call; a public case's
feedback echoes what it returned, and its run's timeline what its processes
sent. So a grading gives student code its calls in two phases
(docs/trust.md, "A hidden case's feedback"):

1. every probe runs its public calls (`Call.hidden` False): values that may be
   shown, from processes that have seen no hidden input;
2. once every probe is done with them (`Gate`), the hidden ones: their
   values are judged, never shown (a hidden case says one fixed kind).

The gate is the grading's, not a probe's: the probes run side by side, and a
hidden call running beside a public one could pass it what it knows by any
channel processes of one machine share (the CPU's load, and behind Landlock
what /proc shows of a process). A process may carry on from phase 1 into
phase 2 (a gloo group's ranks, which then run hidden scenarios); none goes
back. Nothing of a hidden call is traced.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from shardlab.autograder.core.parts import Call


class Gate:
    """The grading's gate: opens when each of its probes has said its public
    calls are done. Each probe holds its own `Party`, whose `public_done` counts
    once however often it is called (the probe says it in a `finally`, and the
    engine again if the probe raised: a probe that failed counts as done)."""

    def __init__(self, probes: int = 1):
        self._left = probes
        self._open = threading.Condition()

    def party(self) -> "Party":
        return Party(self)

    def _done(self) -> None:
        with self._open:
            self._left -= 1
            if self._left <= 0:
                self._open.notify_all()

    def _wait(self, deadline: float | None) -> bool:
        with self._open:
            while self._left > 0:
                timeout = None if deadline is None else deadline - time.monotonic()
                if timeout is not None and timeout <= 0:
                    return False
                self._open.wait(timeout)
            return True


class Party:
    """One probe's hold on the grading's `Gate` (a gate of its own where none is given: `Party.alone()`)."""

    def __init__(self, gate: Gate):
        self._gate, self._said = gate, False
        self._lock = threading.Lock()

    @classmethod
    def alone(cls) -> "Party":
        return Gate(1).party()

    def public_done(self) -> None:
        with self._lock:
            said, self._said = self._said, True
        if not said:
            self._gate._done()

    def wait(self, deadline: float | None) -> bool:
        """Until every probe's public calls are done, or `deadline` (time.monotonic(); None: no limit) has
        passed. True if the gate opened (hidden calls may run), False at the deadline (none may: the grading's
        budget is spent, so each is out of budget). Says this probe's own public calls done first."""
        self.public_done()
        return self._gate._wait(deadline)


def split(calls: Sequence[Call], among: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """The indices (of `among`, default all) of the public calls, and of the hidden ones, each in call order."""
    indices = range(len(calls)) if among is None else among
    return [i for i in indices if not calls[i].hidden], [i for i in indices if calls[i].hidden]
