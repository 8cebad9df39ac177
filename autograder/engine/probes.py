"""Probes: how a part's calls are evaluated on the student's code.

A part names its probe (`Part.probe`); the engine gathers the calls of all
parts with the same probe and evaluates them in one batch per submission:

- "calls": plain function calls in one sandboxed process (`sandbox.process`);
- "gloo": named scenarios on a group of gloo ranks, each rank a trusted
  process plus a walled-in student process (`sandbox.gloo.launch`).

A new kind of evaluation is a new entry in PROBES that follows `Probe`.
"""
from __future__ import annotations

from typing import Protocol, TypeGuard

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.hidden_last import Party
from shardlab.autograder.sandbox.process import Limits, SandboxRun, run_calls


class Probe(Protocol):
    """What PROBES maps a probe name to."""

    def __call__(self, root: str, calls: list[Call], limits: Limits, *, gate: Party | None = None) -> SandboxRun:
        """Evaluate `calls` on the staged submission under `root` (it holds
        assignments/) within `limits`: every public call first, then, once
        `gate` (the grading's: `sandbox.hidden_last`) opens, the hidden ones
        (`Call.hidden`), never in a process that reports a public value.
        Returns one Outcome per call, in order
        (a value or the student's error as text), and what the student's code
        printed. Raises ShardlabError for a submission that cannot be run at
        all (the student's problem) and anything else for a failure of the
        harness itself (the grader's: its parts become internal errors)."""

    # Optional: `prepare` (StartingProbe) and `traces` (TracingProbe). Not
    # declared here because most probes have neither: the engine asks with
    # `starts(probe)` and `traces(probe)`.


class StartingProbe(Probe, Protocol):
    """A probe with a slow start-up."""

    def prepare(self, root: str, limits: Limits) -> None:
        """Called before the expected values are computed so slow start-up (the
        gloo fork server importing torch) overlaps them."""


class TracingProbe(Protocol):
    """A probe that can trace: `traces = True`, and it takes a keyword `traced`
    (indices into `calls`) and gives those calls' outcomes the run's timed
    trace (Outcome.trace; `kit.timelines`)."""

    traces: bool

    def __call__(self, root: str, calls: list[Call], limits: Limits, *, traced: frozenset[int],
                 gate: Party | None = None) -> SandboxRun:
        ...


def starts(probe: Probe) -> TypeGuard[StartingProbe]:
    """Whether the probe has a `prepare` to call first."""
    return hasattr(probe, "prepare")


def traces(probe: Probe) -> TypeGuard[TracingProbe]:
    """Whether the probe can trace (`traces = True`)."""
    return bool(getattr(probe, "traces", False))


PROBES: dict[str, Probe] = {"calls": run_calls, "gloo": run_gloo}
